/** Seconds of history for the drain rate (Retry-After and the arrival check). */
const drainWindowMs = 30_000;

/** The most recent lease ends kept (a busy model ends more than this in its window: the rate is read from these). */
const keptReleases = 1024;

/** How fast a model's leases end: for the estimated wait at arrival and honest Retry-After values. */
export class DrainRate {
  /** When each recent lease ended (performance.now()): a ring, oldest at `oldest`, so a release costs no shift. */
  private readonly releases = new Float64Array(keptReleases);
  private oldest = 0;
  private count = 0;
  /** Moving average of how long one lease is held. */
  private avgLeaseMs = 2000;

  constructor(private readonly parallel: number) {}

  /** A lease held for `heldMs` ended now. */
  released(heldMs: number): void {
    this.avgLeaseMs = this.avgLeaseMs * 0.8 + heldMs * 0.2;
    // The next free place; when the ring is full, that is the oldest's, which the new end replaces.
    this.releases[(this.oldest + this.count) % keptReleases] = performance.now();
    if (this.count < keptReleases) this.count++;
    else this.oldest = (this.oldest + 1) % keptReleases;
  }

  /**
   * Completions per millisecond over the last 30 s (leases ended ÷ time since the oldest of them), or, with fewer
   * than 4 measured, `parallel` ÷ the moving average of a lease's length. Null before any lease ended.
   */
  perMs(): number | null {
    const now = performance.now();
    while (this.count > 0 && now - this.releases[this.oldest] > drainWindowMs) {
      this.oldest = (this.oldest + 1) % keptReleases;
      this.count--;
    }
    if (this.count >= 4) return this.count / Math.max(1, now - this.releases[this.oldest]);
    return this.count > 0 ? this.parallel / this.avgLeaseMs : null;
  }

  /** The time `waiters` take to drain at the recent rate (before any lease ended: whole rounds of the average lease). */
  drainMs(waiters: number): number {
    const rate = this.perMs();
    return rate ? waiters / rate : Math.ceil(waiters / this.parallel) * this.avgLeaseMs;
  }
}
