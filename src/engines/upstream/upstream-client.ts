import { readFileSync } from "node:fs";
import { errors, FormData, Pool, type Dispatcher } from "undici";
import { isAppError } from "../../errors/app-error.ts";
import { injectTraceContext, inSpan, SpanKind } from "../../telemetry/spans.ts";
import { CallBounds } from "./call-bounds.ts";
import { mapUpstreamError, UpstreamConfigError, UpstreamUnavailable } from "./upstream-errors.ts";

export interface UpstreamTimeouts {
  connectMs: number;
  firstByteMs: number;
  idleMs: number;
  totalMs: number;
}

export interface UpstreamTarget {
  /** The OpenAI-style base, `https://host:8000/v1`, without a trailing slash. */
  url: string;
  apiKey: string | null;
  model: string;
  /** PEM text of a private CA (read at load). */
  ca: string | null;
}

export interface UpstreamCall {
  method?: "GET" | "POST";
  /** Appended to the target's base URL (`/chat/completions`), or to its origin root when `root` is set. */
  path: string;
  root?: boolean;
  json?: unknown;
  form?: FormData;
  signal: AbortSignal;
  /**
   * A streamed answer: its silences are bounded by these bounds (`boundsFor`, made over `signal`, and disposed by the
   * caller) instead of by the pool's idle timeout.
   */
  streaming?: CallBounds;
  /** A health check: not traced (it would add a root span per upstream every interval). */
  healthCheck?: boolean;
  /** The §7 param an upstream context-window error is reported on. */
  contextParam?: string;
  /** The §7 param a 501 (the upstream cannot do what the parameter asks: llama-server's /infill without FIM tokens) names. */
  unsupportedParam?: string;
}

export interface UpstreamResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Dispatcher.ResponseData["body"];
  /** The call's bounds, which go on while the body is read. */
  bounds: CallBounds;
}

/** OpenSSL's verdicts on a certificate we do not trust: a configuration problem, not an outage. */
const tlsTrustErrors = /CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)|ERR_TLS_CERT_ALTNAME_INVALID/;

/** The connection closed (or was reset) under a request before its answer began. */
function closedBeforeAnswering(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return err instanceof errors.SocketError || code === "ECONNRESET" || code === "EPIPE";
}

/** `https://gpu-a:8000/v1` → `https://gpu-a:8000` (vLLM, SGLang and llama-server put /tokenize and /health at the root). */
export function rootOf(url: string): string {
  return url.replace(/\/v1$/, "");
}

/**
 * One upstream server: a keep-alive connection pool (undici) with our timeouts, TLS verified against the system
 * roots or the upstream's own CA. Every failure to get an answer (connect, timeouts, resets, 429, 5xx) is an
 * `UpstreamUnavailable` (503 overloaded, retryable elsewhere); other refusals map to §7 by `mapUpstreamError`.
 */
export class UpstreamClient {
  private readonly pool: Pool;
  private readonly basePath: string;
  private readonly rootPath: string;
  readonly origin: string;

  constructor(
    readonly target: UpstreamTarget,
    private readonly timeouts: UpstreamTimeouts,
    private readonly modelgate: boolean,
  ) {
    const url = new URL(target.url);
    this.origin = url.origin;
    this.basePath = url.pathname.replace(/\/$/, "");
    this.rootPath = rootOf(this.basePath);
    this.pool = new Pool(url.origin, {
      connect: { timeout: timeouts.connectMs, ...(target.ca ? { ca: target.ca } : {}) },
      headersTimeout: timeouts.firstByteMs,
      bodyTimeout: timeouts.idleMs,
      keepAliveTimeout: 30_000,
    });
  }

  static readCa(file: string | undefined): string | null {
    return file ? readFileSync(file, "utf8") : null;
  }

  /** Sends one request; resolves with a 2xx response whose body the caller must consume, or throws a mapped error. */
  send(call: UpstreamCall): Promise<UpstreamResponse> {
    if (call.healthCheck) return this.sendNow(call);
    const attributes = { "server.address": this.origin, "http.request.method": call.method ?? "POST", "gen_ai.request.model": this.target.model };
    return inSpan(`upstream ${call.method ?? "POST"} ${call.path}`, attributes, () => this.sendNow(call), SpanKind.CLIENT);
  }

  /** The bounds of one call over `signal`: this upstream's total timeout, and the silences of a streamed answer. */
  boundsFor(signal: AbortSignal, silences: { firstMs: number; idleMs: number } | null = null): CallBounds {
    return new CallBounds(signal, this.timeouts.totalMs, silences);
  }

  private async sendNow(call: UpstreamCall): Promise<UpstreamResponse> {
    const bounds = call.streaming ?? this.boundsFor(call.signal);
    const headers: Record<string, string> = { accept: call.form ? "application/json" : "application/json, text/event-stream" };
    if (this.target.apiKey) headers.authorization = `Bearer ${this.target.apiKey}`;
    if (call.json !== undefined) headers["content-type"] = "application/json";
    injectTraceContext(headers);
    const request: Dispatcher.RequestOptions = {
      method: call.method ?? "POST",
      path: `${call.root ? this.rootPath : this.basePath}${call.path}`,
      headers,
      body: call.form ?? (call.json === undefined ? null : JSON.stringify(call.json)),
      signal: bounds.signal,
      ...(call.streaming ? { bodyTimeout: 0 } : {}),
    };
    let response: Dispatcher.ResponseData;
    try {
      response = await this.pool.request(request).catch((err: unknown) => {
        // A kept-alive connection that the upstream closed as the request went out on it (its keep-alive timeout ran
        // out: llama-server's is 5 s, and a loaded machine runs our own earlier timer late) fails before any answer.
        // The request goes once more, on a new connection; at worst an upstream that died mid-request sees it twice.
        if (bounds.signal.aborted || !closedBeforeAnswering(err)) throw err;
        return this.pool.request(request);
      });
    } catch (err) {
      bounds.dispose();
      throw this.failure(err, bounds);
    }
    if (response.statusCode >= 200 && response.statusCode < 300) {
      // The bounds hold until the caller has read (or dropped) the body; a streamed answer's caller disposes its own.
      if (!call.streaming) response.body.once("close", () => bounds.dispose());
      return { status: response.statusCode, headers: response.headers, body: response.body, bounds };
    }
    const text = await response.body.text().catch(() => "");
    bounds.dispose();
    throw mapUpstreamError(response.statusCode, response.headers, text, { modelgate: this.modelgate, contextParam: call.contextParam, unsupportedParam: call.unsupportedParam });
  }

  /** Reads a whole JSON answer, with our timeouts. */
  async json<T>(call: UpstreamCall): Promise<T> {
    const response = await this.send(call);
    try {
      return (await response.body.json()) as T;
    } catch (err) {
      if (err instanceof SyntaxError && !response.bounds.signal.aborted) {
        throw new UpstreamUnavailable("The model's engine sent a malformed answer.", null, 1000, "overloaded", `malformed JSON: ${err.message}`);
      }
      throw this.failure(err, response.bounds);
    }
  }

  /**
   * What an error while talking to the upstream means for us. When the call's bounds aborted it, their reason: the
   * request's own abort (client gone, our deadline) unchanged, or the bound that ran out. Everything else is the
   * upstream being unavailable. The client's message never names the upstream; the engine logs it with the error's
   * detail.
   */
  failure(err: unknown, bounds: CallBounds): unknown {
    if (bounds.signal.aborted) return bounds.signal.reason;
    if (isAppError(err) || err instanceof UpstreamConfigError) return err;
    const unavailable = (message: string, detail: string) => new UpstreamUnavailable(message, null, 1000, "overloaded", detail);
    if (err instanceof errors.HeadersTimeoutError) return unavailable(`The model's engine did not answer within ${this.timeouts.firstByteMs} ms.`, "first-byte timeout");
    if (err instanceof errors.BodyTimeoutError) return unavailable(`The model's engine stalled: nothing for ${this.timeouts.idleMs} ms.`, "idle timeout");
    if (err instanceof errors.ConnectTimeoutError) return unavailable(`The model's engine could not be reached within ${this.timeouts.connectMs} ms.`, "connect timeout");
    const code = (err as NodeJS.ErrnoException).code;
    if (code && tlsTrustErrors.test(code)) {
      return new UpstreamConfigError(`TLS to ${this.origin} failed (${code}): give the upstream's CA as \`ca\` in its entry`);
    }
    return unavailable("The model's engine could not be reached.", code ?? (err as Error).message);
  }

  async close(): Promise<void> {
    await this.pool.close().catch(() => this.pool.destroy());
  }
}
