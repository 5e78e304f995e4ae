import { AppError } from "../../errors/app-error.ts";

/** The context-window errors of the engines we front, by their own words. */
const contextPatterns = [
  /maximum context length/i, // vLLM: "This model's maximum context length is 4096 tokens..."
  /exceeds the available context size/i, // llama-server: "request (4476 tokens) exceeds the available context size (4096 tokens)"
  /exceed_context_size_error/i,
  /longer than the model's context length/i, // SGLang: "The input (N tokens) is longer than the model's context length (M tokens)."
  /`inputs` tokens \+ `max_new_tokens` must be <=/i, // TGI
  /context[ _]length[ _]exceeded/i, // Modelgate and OpenAI
  /input_validation_error.*too long/i,
];

/** What an upstream's error body says, whatever its shape (OpenAI, vLLM's old `object: error`, TGI, §7). */
export interface UpstreamErrorBody {
  message: string;
  code: string | null;
  param: string | null;
}

export function readErrorBody(text: string): UpstreamErrorBody {
  try {
    const json = JSON.parse(text) as Record<string, unknown>;
    const inner = (typeof json.error === "object" && json.error !== null ? json.error : json) as Record<string, unknown>;
    const message = typeof inner.message === "string" ? inner.message : typeof json.error === "string" ? json.error : text;
    const code = typeof inner.code === "string" ? inner.code : typeof inner.type === "string" ? inner.type : null;
    return { message, code, param: typeof inner.param === "string" ? inner.param : null };
  } catch {
    return { message: text.slice(0, 500), code: null, param: null };
  }
}

/** Retry-After in milliseconds from an upstream's headers (seconds, an HTTP date, or retry-after-ms). */
export function retryAfterMs(headers: Record<string, string | string[] | undefined>, fallbackMs = 1000): number {
  const ms = Number(headers["retry-after-ms"]);
  if (Number.isFinite(ms) && ms > 0) return ms;
  const value = headers["retry-after"];
  const text = Array.isArray(value) ? value[0] : value;
  if (!text) return fallbackMs;
  const seconds = Number(text);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(text);
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : fallbackMs;
}

/**
 * Thrown for answers the pool may retry elsewhere (connect errors, timeouts, 429, 5xx, a Modelgate node loading).
 * `message` is what the client reads: a fixed sentence that never names the upstream nor repeats its words.
 * `detail` (kept as the error's `cause`) is what the log gets: the upstream's status, error code or words.
 */
export class UpstreamUnavailable extends AppError {
  constructor(
    message: string,
    readonly upstreamStatus: number | null,
    retryAfter: number,
    code: "overloaded" | "model_loading" = "overloaded",
    detail?: string,
  ) {
    super(code, { message, retryAfterMs: retryAfter, ...(detail === undefined ? {} : { cause: detail }) });
    this.name = "UpstreamUnavailable";
  }
}

/** What the log keeps of an upstream's failure: the detail its mapping attached, never sent to the client. */
export function upstreamDetail(err: unknown): string | null {
  return err instanceof AppError && typeof err.cause === "string" ? err.cause : null;
}

/**
 * The upstream refused our own credentials, model name or certificate: our configuration is wrong. Not an AppError
 * on purpose: the error handler logs it at error level with this message and answers a bare 500 internal_error,
 * so nothing about the upstream reaches the client.
 */
export class UpstreamConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UpstreamConfigError";
  }
}

export interface MapOptions {
  /** The upstream is a Modelgate node: its §7 codes are passed through. */
  modelgate: boolean;
  /** Where a context-window error is reported: `messages` for chat, `input` for embeddings. */
  contextParam?: string;
  /** A 501 (Not Implemented) is a 400 naming this parameter: what it asks is what the upstream cannot do. */
  unsupportedParam?: string;
}

/** §7 codes of a Modelgate upstream that mean the same for our client. */
const passedThrough = new Set(["invalid_parameter", "context_length_exceeded", "request_too_large"]);

/**
 * Maps an upstream's refusal to §7. Parameter problems stay 400 (the context window as context_length_exceeded);
 * a refusal of our own credentials or model name is our configuration's fault (UpstreamConfigError); rate limits,
 * overloads and server errors are 503 overloaded, with the upstream's Retry-After. The client reads our own
 * sentences; the upstream's status and words are the error's `cause`, for the log.
 */
export function mapUpstreamError(status: number, headers: Record<string, string | string[] | undefined>, text: string, options: MapOptions): Error {
  const body = readErrorBody(text);
  const detail = `upstream ${status}: ${body.message}`;
  if (options.modelgate && body.code === "model_loading") {
    return new UpstreamUnavailable("The model is loading. Retry after the time given in Retry-After.", status, retryAfterMs(headers), "model_loading", detail);
  }
  if (status === 501 && options.unsupportedParam) {
    return new AppError("invalid_parameter", { param: options.unsupportedParam, message: `The model does not support ${options.unsupportedParam}.`, cause: detail });
  }
  if (status === 429 || status >= 500) {
    return new UpstreamUnavailable("The model's engine is busy or failing. Retry after the time given in Retry-After.", status, retryAfterMs(headers), "overloaded", detail);
  }
  // Another Modelgate node's §7 message was written for clients under the same rules: it is passed on.
  const message = options.modelgate ? body.message : undefined;
  if (contextPatterns.some((p) => p.test(body.message) || (body.code !== null && p.test(body.code)))) {
    return new AppError("context_length_exceeded", { param: options.contextParam ?? "messages", message, cause: detail });
  }
  if (status === 401 || status === 403 || status === 404 || status === 407) {
    return new UpstreamConfigError(`upstream refused our request (${status}): ${body.message}; check the model's upstreams (url, apiKey, model)`);
  }
  if (options.modelgate && body.code !== null && passedThrough.has(body.code)) {
    return new AppError(body.code as "invalid_parameter", { param: body.param, message, cause: detail });
  }
  const refused = body.param ? `The model's engine refused the parameter '${body.param}'.` : "The model's engine refused the request as invalid.";
  return new AppError("invalid_parameter", { param: body.param, message: refused, cause: detail });
}
