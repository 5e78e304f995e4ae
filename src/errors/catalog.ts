/** The one table of error codes (spec §7): code -> HTTP status and error type. */
export const errorCatalog = {
  invalid_parameter: { status: 400, type: "invalid_request_error" },
  context_length_exceeded: { status: 400, type: "invalid_request_error" },
  invalid_api_key: { status: 401, type: "authentication_error" },
  model_not_in_plan: { status: 403, type: "permission_error" },
  ip_not_allowed: { status: 403, type: "permission_error" },
  /** The console and admin API only: a signed-in user whose role does not allow the operation. */
  permission_denied: { status: 403, type: "permission_error" },
  model_not_found: { status: 404, type: "invalid_request_error" },
  request_too_large: { status: 413, type: "invalid_request_error" },
  rate_limit_exceeded: { status: 429, type: "rate_limit_error" },
  internal_error: { status: 500, type: "server_error" },
  model_loading: { status: 503, type: "server_error" },
  overloaded: { status: 503, type: "server_error" },
} as const;

export type ErrorCode = keyof typeof errorCatalog;
export type ErrorType = (typeof errorCatalog)[ErrorCode]["type"];

/** Codes whose answer carries Retry-After (spec §7). */
export const retryableCodes: ReadonlySet<ErrorCode> = new Set(["rate_limit_exceeded", "model_loading", "overloaded"]);
