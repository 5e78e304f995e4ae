/** Outcome of one counted (or refused) request in a fixed window that starts at the window's first hit. */
export interface HitResult {
  /** Requests counted in the window, this one included when allowed. */
  count: number;
  /** Milliseconds until the window frees. */
  resetMs: number;
  allowed: boolean;
}

/**
 * The tiny interface the memory and Redis limiters share (compare @fastify/rate-limit's LocalStore). A refused
 * request is not counted.
 */
export interface RateLimitStore {
  hit(bucket: string, limit: number, windowMs: number): Promise<HitResult>;
  /** The window's state without counting (for headers on answers that do not count). */
  peek(bucket: string, limit: number, windowMs: number): Promise<HitResult>;
  close(): Promise<void>;
  /** Answers when the store is reachable (a shared store's health probe). */
  ping?(): Promise<void>;
}
