import type { AppError } from "./app-error.ts";

export interface ErrorEnvelope {
  error: { message: string; type: string; code: string; param: string | null };
}

export function toEnvelope(err: AppError): ErrorEnvelope {
  return { error: { message: err.message, type: err.type, code: err.code, param: err.param } };
}

/** Retry-After in whole seconds (at least 1) plus retry-after-ms, which the openai client reads first. */
export function retryHeaders(retryAfterMs: number): Record<string, string> {
  const ms = Math.max(1, Math.ceil(retryAfterMs));
  return { "retry-after": String(Math.max(1, Math.ceil(ms / 1000))), "retry-after-ms": String(ms) };
}
