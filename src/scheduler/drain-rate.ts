/** Seconds of history for the drain rate (Retry-After and the arrival check). */
const drainWindowMs = 30_000;

/** How fast a model's leases end: for the estimated wait at arrival and honest Retry-After values. */
export class DrainRate {
  /** When each recent lease ended (performance.now()). */
  private readonly releases: number[] = [];
  /** Moving average of how long one lease is held. */
  private avgLeaseMs = 2000;

  constructor(private readonly parallel: number) {}

  /** A lease held for `heldMs` ended now. */
  released(heldMs: number): void {
    this.avgLeaseMs = this.avgLeaseMs * 0.8 + heldMs * 0.2;
    this.releases.push(performance.now());
    if (this.releases.length > 1024) this.releases.shift();
  }

  /**
   * Completions per millisecond over the last 30 s (leases ended ÷ time since the oldest of them), or, with fewer
   * than 4 measured, `parallel` ÷ the moving average of a lease's length. Null before any lease ended.
   */
  perMs(): number | null {
    const now = performance.now();
    while (this.releases.length > 0 && now - this.releases[0] > drainWindowMs) this.releases.shift();
    if (this.releases.length >= 4) return this.releases.length / Math.max(1, now - this.releases[0]);
    return this.releases.length > 0 ? this.parallel / this.avgLeaseMs : null;
  }

  /** The time `waiters` take to drain at the recent rate (before any lease ended: whole rounds of the average lease). */
  drainMs(waiters: number): number {
    const rate = this.perMs();
    return rate ? waiters / rate : Math.ceil(waiters / this.parallel) * this.avgLeaseMs;
  }
}
