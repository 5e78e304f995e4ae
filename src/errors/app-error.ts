import { errorCatalog, type ErrorCode } from "./catalog.ts";

export interface AppErrorOptions {
  message?: string;
  param?: string | null;
  /** Overrides the catalog status; only for 405 (decisions.md), which reuses `invalid_parameter`. */
  status?: number;
  /** For 429/503: how long the client should wait. Sent as Retry-After (whole seconds, >= 1) and retry-after-ms. */
  retryAfterMs?: number;
  headers?: Record<string, string>;
  cause?: unknown;
  /**
   * A refusal made as a matter of course (the scheduler's capacity refusals, by the thousand under a flood): its
   * access-log line and its metrics record it, so the error handler adds no warn line of its own.
   */
  routine?: boolean;
  /** context_length_exceeded by the prompt alone: its size and the window, for a dialect's own wording of it. */
  overflow?: PromptOverflow;
}

export interface PromptOverflow {
  promptTokens: number;
  window: number;
}

const defaultMessages: Record<ErrorCode, string> = {
  invalid_parameter: "Invalid request.",
  context_length_exceeded: "The prompt plus max_tokens exceed the model's context window.",
  invalid_api_key: "Invalid API key.",
  model_not_in_plan: "This key is not allowed to use this model or endpoint.",
  ip_not_allowed: "Requests from this address are not allowed for this account.",
  permission_denied: "Your role does not allow this operation.",
  model_not_found: "The model does not exist.",
  request_too_large: "The request body exceeds the plan's size limit.",
  rate_limit_exceeded: "Rate limit exceeded. Retry after the time given in Retry-After.",
  internal_error: "The server had an unexpected error.",
  model_loading: "The model is loading. Retry after the time given in Retry-After.",
  overloaded: "The model is at capacity. Retry after the time given in Retry-After.",
};

/** The only error type code throws on purpose; the error handler turns it into the §7 envelope. */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly param: string | null;
  readonly status: number;
  readonly type: string;
  readonly retryAfterMs?: number;
  readonly headers: Record<string, string>;
  readonly routine: boolean;
  readonly overflow?: PromptOverflow;

  constructor(code: ErrorCode, options: AppErrorOptions = {}) {
    super(options.message ?? defaultMessages[code], options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "AppError";
    this.code = code;
    this.param = options.param ?? null;
    this.status = options.status ?? errorCatalog[code].status;
    this.type = errorCatalog[code].type;
    this.retryAfterMs = options.retryAfterMs;
    this.headers = options.headers ?? {};
    this.routine = options.routine ?? false;
    if (options.overflow) this.overflow = options.overflow;
  }
}

export function isAppError(value: unknown): value is AppError {
  return value instanceof AppError;
}
