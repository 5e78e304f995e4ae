/**
 * Counters of amounts (tokens, micro-units of money) that a request reserves at admission and settles after it
 * ran (issue 32). Two kinds of bucket:
 * - a rolling window (`windowMs`): it starts at its first reservation and ends `windowMs` later, like the request
 *   limiter's; a settle after it ended changes nothing (the next window never pays for the previous one);
 * - a seeded period (`expireAt`): a UTC day or month, whose starting value comes from the usage table. A bucket
 *   the store does not hold (first use, a restart, a Redis flush) is reported `missing`: the caller seeds it
 *   (`seed`, which keeps a value another replica seeded first) and reserves again.
 * A reservation is taken in every bucket or in none, atomically: it must fit each (used + amount ≤ limit).
 */
export interface AmountHit {
  bucket: string;
  limit: number;
  amount: number;
  /** A rolling window; else a seeded period that ends at `expireAt`. */
  windowMs?: number;
  /** Epoch ms at which a seeded period ends. */
  expireAt?: number;
}

export interface AmountResult {
  /** Used in the window or period, this reservation included when it was taken. */
  used: number;
  /** Milliseconds until the window or period ends. */
  resetMs: number;
  /** Whether the amount fitted this bucket. */
  fits: boolean;
  /** The window's identity, which its settle names (a seeded period's is ""). */
  windowId: string;
}

export type ReserveOutcome = { missing: string[] } | { missing: null; taken: boolean; results: AmountResult[] };

/** A settle: the difference between what was used and what was reserved, in the window it was reserved in. */
export interface AmountSettle {
  bucket: string;
  delta: number;
  windowId: string;
}

export interface TokenStore {
  reserve(hits: AmountHit[]): Promise<ReserveOutcome>;
  settle(settles: AmountSettle[]): Promise<void>;
  /** The buckets' state without reserving; a missing seeded bucket reads as 0 used. */
  peek(hits: AmountHit[]): Promise<AmountResult[]>;
  /** Sets a seeded bucket's starting value unless it is held already. */
  seed(bucket: string, value: number, expireAt: number): Promise<void>;
  close(): Promise<void>;
}

interface Held {
  used: number;
  windowId: string;
  resetAt: number;
}

/** Buckets held at most (least recently used dropped first), as the request limiter's memory store. */
const maxBuckets = 100_000;

/** One process's counters: exact for a single server; Redis shares them between replicas. */
export class MemoryTokenStore implements TokenStore {
  private readonly held = new Map<string, Held>();
  private windows = 0;

  constructor(private readonly now: () => number = Date.now) {}

  async reserve(hits: AmountHit[]): Promise<ReserveOutcome> {
    return this.reserveSync(hits);
  }

  reserveSync(hits: AmountHit[]): ReserveOutcome {
    const now = this.now();
    const missing = hits.filter((h) => h.windowMs === undefined && !this.live(h.bucket, now)).map((h) => h.bucket);
    if (missing.length > 0) return { missing };
    const current = hits.map((h) => this.live(h.bucket, now));
    const fits = hits.map((h, i) => (current[i]?.used ?? 0) + h.amount <= h.limit);
    const taken = fits.every(Boolean);
    const results = hits.map((h, i) => {
      let w = current[i];
      if (taken) {
        if (!w) {
          w = { used: 0, windowId: `m${++this.windows}`, resetAt: now + h.windowMs! };
          if (this.held.size >= maxBuckets) this.held.delete(this.held.keys().next().value!);
        }
        this.held.delete(h.bucket);
        w.used += h.amount;
        this.held.set(h.bucket, w);
      }
      return { used: w?.used ?? 0, resetMs: w ? w.resetAt - now : (h.windowMs ?? 0), fits: fits[i], windowId: w?.windowId ?? "" };
    });
    return { missing: null, taken, results };
  }

  async settle(settles: AmountSettle[]): Promise<void> {
    this.settleSync(settles);
  }

  settleSync(settles: AmountSettle[]): void {
    const now = this.now();
    for (const s of settles) {
      const w = this.live(s.bucket, now);
      if (w && w.windowId === s.windowId) w.used = Math.max(0, w.used + s.delta);
    }
  }

  async peek(hits: AmountHit[]): Promise<AmountResult[]> {
    return this.peekSync(hits);
  }

  peekSync(hits: AmountHit[]): AmountResult[] {
    const now = this.now();
    return hits.map((h) => {
      const w = this.live(h.bucket, now);
      const resetMs = w ? w.resetAt - now : h.windowMs ?? Math.max(0, (h.expireAt ?? now) - now);
      return { used: w?.used ?? 0, resetMs, fits: (w?.used ?? 0) + h.amount <= h.limit, windowId: w?.windowId ?? "" };
    });
  }

  async seed(bucket: string, value: number, expireAt: number): Promise<void> {
    this.seedSync(bucket, value, expireAt);
  }

  seedSync(bucket: string, value: number, expireAt: number): void {
    if (this.live(bucket, this.now())) return;
    this.held.set(bucket, { used: value, windowId: "", resetAt: expireAt });
  }

  /**
   * Starts a rolling window at what the shared store last said of it (used, and when it ends), unless this store
   * holds it already: the fallback during an outage then admits only what was left, not a whole fresh window.
   */
  adopt(bucket: string, used: number, resetAt: number): void {
    if (resetAt <= this.now() || this.live(bucket, this.now())) return;
    this.held.set(bucket, { used, windowId: `m${++this.windows}`, resetAt });
  }

  private live(bucket: string, now: number): Held | undefined {
    const w = this.held.get(bucket);
    if (w && w.resetAt <= now) {
      this.held.delete(bucket);
      return undefined;
    }
    return w;
  }

  async close(): Promise<void> {
    this.held.clear();
  }
}
