import type { AppError } from "./app-error.ts";

/** Anthropic's error body (`{type: "error", error: {type, message}}`), what its SDKs and Claude Code read. */
export interface AnthropicEnvelope {
  type: "error";
  error: { type: string; message: string };
}

/** Anthropic's status for each of ours: 503 (overloaded, model loading) is its 529, which its clients retry. */
const statusOf = (status: number): number => (status === 503 ? 529 : status);

const typeByStatus: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  500: "api_error",
  529: "overloaded_error",
};

function typeOf(status: number): string {
  return typeByStatus[status] ?? (status < 500 ? "invalid_request_error" : "api_error");
}

/**
 * One of our errors in Anthropic's terms: its status, and its envelope. A prompt that alone overflows the window
 * gets the wording Anthropic's clients recognise ("prompt is too long: N tokens > M maximum") to compact and retry.
 */
export function toAnthropicError(err: AppError): { status: number; body: AnthropicEnvelope } {
  const status = statusOf(err.status);
  const overflow = err.overflow;
  // Anthropic's envelope has no param: the field leads the message, as in Anthropic's own ("messages.0.content: …").
  const message = overflow
    ? `prompt is too long: ${overflow.promptTokens} tokens > ${overflow.window} maximum`
    : err.param !== null && !err.message.startsWith(err.param) && !err.message.includes(`'${err.param}'`)
      ? `${err.param}: ${err.message}`
      : err.message;
  return { status, body: { type: "error", error: { type: typeOf(status), message } } };
}
