import type { Counter } from "prom-client";

/** One label set of a counter, counted in a plain field until the registry is read. */
export interface CountedSeries {
  inc(by?: number): void;
}

class Series implements CountedSeries {
  pending = 0;

  constructor(readonly labels: Record<string, string>) {}

  inc(by = 1): void {
    this.pending += by;
  }
}

/**
 * The hot series of one prom-client counter: each label set is looked up once by a key the caller builds, counted in
 * a field, and added to the counter when the registry is read (the counter's `collect` calls `flush`). prom-client's
 * own child of a label set (`counter.labels(...)`) builds, checks and hashes its label object on every `inc`, about
 * 0.4 µs a call; a request counts four or five series.
 */
export class CountedSeriesSet<L extends string> {
  private readonly byKey = new Map<string, Series>();
  private counter: Counter<L> | null = null;

  /** The counter to flush into; made after this set, since its `collect` must name the set. */
  of(counter: Counter<L>): Counter<L> {
    this.counter = counter;
    return counter;
  }

  /** The series of `key`, made from `labels()` the first time. */
  get(key: string, labels: () => Record<L, string>): CountedSeries {
    let series = this.byKey.get(key);
    if (!series) this.byKey.set(key, (series = new Series(labels())));
    return series;
  }

  /** Adds what each series counted since the last read to the counter. */
  flush(): void {
    if (!this.counter) return;
    for (const series of this.byKey.values()) {
      if (series.pending === 0) continue;
      this.counter.inc(series.labels as Partial<Record<L, string>>, series.pending);
      series.pending = 0;
    }
  }
}
