/** Seconds of history kept. */
const windowSeconds = 60;

/**
 * Events per key over the last minute, in one-second buckets: O(1) to add, bounded by its keys (a route's targets
 * and fallback reasons, which the config bounds), whatever the traffic.
 */
export class LastMinute {
  private readonly byKey = new Map<string, { counts: Uint32Array; seconds: Float64Array }>();

  add(key: string, now = Date.now()): void {
    let ring = this.byKey.get(key);
    if (!ring) this.byKey.set(key, (ring = { counts: new Uint32Array(windowSeconds), seconds: new Float64Array(windowSeconds).fill(-1) }));
    const second = Math.floor(now / 1000);
    const slot = second % windowSeconds;
    if (ring.seconds[slot] !== second) {
      ring.seconds[slot] = second;
      ring.counts[slot] = 0;
    }
    ring.counts[slot]++;
  }

  /** Each key's events of the last 60 seconds (keys with none left out). */
  counts(now = Date.now()): Map<string, number> {
    const second = Math.floor(now / 1000);
    const totals = new Map<string, number>();
    for (const [key, ring] of this.byKey) {
      let total = 0;
      for (let i = 0; i < windowSeconds; i++) if (second - ring.seconds[i] < windowSeconds) total += ring.counts[i];
      if (total > 0) totals.set(key, total);
    }
    return totals;
  }
}
