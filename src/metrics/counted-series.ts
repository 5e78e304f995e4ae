import { Counter, type CounterConfiguration } from "prom-client";

/** A series by its label values, from `cache`: the lookup that makes it (prom-client hashes a label object) runs once per set. */
export function cachedSeries<T>(cache: Map<string, T>, key: string, make: () => T): T {
  let series = cache.get(key);
  if (!series) cache.set(key, (series = make()));
  return series;
}

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
 * A prom-client counter whose hot series are counted in fields: each label set is looked up once by a key the caller
 * builds, and what it counted is added to the counter when the registry is read (the counter's `collect`).
 * prom-client's own child of a label set (`counter.labels(...)`) builds, checks and hashes its label object on every
 * `inc`, about 0.4 µs a call; a request counts four or five series.
 */
export class CountedSeriesSet<L extends string> {
  private readonly byKey = new Map<string, Series>();
  readonly counter: Counter<L>;

  constructor(configuration: Omit<CounterConfiguration<L>, "collect">) {
    this.counter = new Counter({ ...configuration, collect: () => this.flush() });
  }

  /** The series of `key`, made from `labels()` the first time. */
  get(key: string, labels: () => Record<L, string>): CountedSeries {
    return cachedSeries(this.byKey, key, () => new Series(labels()));
  }

  /** Adds what each series counted since the last read to the counter. */
  private flush(): void {
    for (const series of this.byKey.values()) {
      if (series.pending === 0) continue;
      this.counter.inc(series.labels as Partial<Record<L, string>>, series.pending);
      series.pending = 0;
    }
  }
}
