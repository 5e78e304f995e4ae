import type { BucketHit, HitResult, RateLimitStore } from "./store.ts";

interface Window {
  count: number;
  resetAt: number;
}

/**
 * Buckets held at most, least recently used dropped first: an attacker rotating addresses cannot grow the map
 * without bound. Dropping a bucket forgets its count, so the cap is far above what one node serves in a window.
 */
export const defaultMaxBuckets = 100_000;

/** One process's limiter: exact for a single server; use Redis when several replicas share keys. */
export class MemoryStore implements RateLimitStore {
  /** In least-recently-used order (a Map iterates in insertion order; a used bucket is moved to the end). */
  private readonly windows = new Map<string, Window>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    private readonly now: () => number = Date.now,
    private readonly maxBuckets = defaultMaxBuckets,
  ) {
    this.sweeper = setInterval(() => this.sweep(), 30_000);
    this.sweeper.unref();
  }

  /** Buckets held now (tests, and the cap's proof). */
  get size(): number {
    return this.windows.size;
  }

  async hit(bucket: string, limit: number, windowMs: number): Promise<HitResult> {
    return this.hitSync(bucket, limit, windowMs);
  }

  hitSync(bucket: string, limit: number, windowMs: number): HitResult {
    return this.hitAllSync([{ bucket, limit, windowMs }])[0];
  }

  async hitAll(hits: BucketHit[]): Promise<HitResult[]> {
    return this.hitAllSync(hits);
  }

  hitAllSync(hits: BucketHit[]): HitResult[] {
    const now = this.now();
    const windows = hits.map((h) => this.current(h.bucket, h.windowMs, now));
    const allowed = hits.every((h, i) => windows[i].count < h.limit);
    return hits.map((h, i) => {
      const w = windows[i];
      if (allowed) w.count += 1;
      return { count: w.count, resetMs: w.resetAt - now, allowed: allowed || w.count < h.limit };
    });
  }

  async release(bucket: string, _windowMs?: number): Promise<void> {
    this.releaseSync(bucket);
  }

  releaseSync(bucket: string): void {
    const w = this.windows.get(bucket);
    if (w && w.resetAt > this.now() && w.count > 0) w.count -= 1;
  }

  /**
   * Starts a window at what a shared store last said of it (its count, and when it ends), unless this store holds one
   * already: the fallback during an outage then admits only what was left, not a whole fresh window.
   */
  adopt(bucket: string, count: number, resetAt: number): void {
    const now = this.now();
    const held = this.windows.get(bucket);
    if (resetAt <= now || (held && held.resetAt > now)) return;
    this.current(bucket, resetAt - now, now).count = count;
  }

  async peek(bucket: string, limit: number, windowMs: number): Promise<HitResult> {
    const now = this.now();
    const w = this.windows.get(bucket);
    if (!w || w.resetAt <= now) return { count: 0, resetMs: windowMs, allowed: true };
    return { count: w.count, resetMs: w.resetAt - now, allowed: w.count < limit };
  }

  /**
   * The bucket's open window (a new one when it has none or it ended), marked as the most recently used. The order
   * only matters once the map is full, so a used bucket is moved to the end only from half full on: below that, a
   * hit is one lookup, not a delete and an insert (a bucket used since then is still newer than any that was not).
   */
  private current(bucket: string, windowMs: number, now: number): Window {
    let w = this.windows.get(bucket);
    if (w && w.resetAt > now) {
      if (this.windows.size * 2 >= this.maxBuckets) {
        this.windows.delete(bucket);
        this.windows.set(bucket, w);
      }
      return w;
    }
    this.windows.delete(bucket);
    w = { count: 0, resetAt: now + windowMs };
    // Full: the least recently used bucket goes.
    if (this.windows.size >= this.maxBuckets) this.windows.delete(this.windows.keys().next().value!);
    this.windows.set(bucket, w);
    return w;
  }

  private sweep(): void {
    const now = this.now();
    for (const [bucket, w] of this.windows) if (w.resetAt <= now) this.windows.delete(bucket);
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    this.windows.clear();
  }
}
