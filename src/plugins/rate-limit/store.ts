/** Outcome of one counted (or refused) request in a fixed window that starts at the window's first hit. */
export interface HitResult {
  /** Requests counted in the window, this one included when allowed. */
  count: number;
  /** Milliseconds until the window frees. */
  resetMs: number;
  allowed: boolean;
}

/** One bucket a request is counted in. */
export interface BucketHit {
  bucket: string;
  limit: number;
  windowMs: number;
}

/**
 * The tiny interface the memory and Redis limiters share (compare @fastify/rate-limit's LocalStore). A refused
 * request is not counted.
 */
export interface RateLimitStore {
  hit(bucket: string, limit: number, windowMs: number): Promise<HitResult>;
  /**
   * Counts one request in several buckets at once (a key's and its account's): in all of them when every one has
   * room, in none otherwise, atomically. Each result's `allowed` says whether that bucket had room.
   */
  hitAll(hits: BucketHit[]): Promise<HitResult[]>;
  /** Takes back one counted request (a reservation that turned out not to count), if its window is still open. */
  release(bucket: string, windowMs: number): Promise<void>;
  /** The window's state without counting (for headers on answers that do not count). */
  peek(bucket: string, limit: number, windowMs: number): Promise<HitResult>;
  close(): Promise<void>;
}
