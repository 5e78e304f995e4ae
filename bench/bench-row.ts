/** One line of the benchmark table: the service's figure against the raw engine's, measured in the same run. */
export interface BenchRow {
  item: string;
  service: number;
  raw: number;
  unit: string;
  /** The median over the runs of each run's figure: service / raw for throughput; what the item says otherwise. */
  ratio: number;
  /** The min and max of those figures, when the item was measured over several runs. */
  range?: [number, number];
  target: string;
}

/** min / median / max of a set of runs. */
export function spread(values: readonly number[]): { min: number; median: number; max: number } {
  return { min: Math.min(...values), median: median(values), max: Math.max(...values) };
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** A side's figure in each run, or one figure. */
type Runs = number | readonly number[];

export interface RatioRowOf {
  item: string;
  service: Runs;
  raw: Runs;
  unit: string;
  target: string;
  /** Each run's figure; by default service ÷ raw run by run (the two sides alternate within a run, so they pair). */
  ratios?: readonly number[];
}

/**
 * A row from the runs: each side's median, the median of the runs' ratios and, over several runs, their min–max.
 * The ratio is taken within each run, never between the two medians: on a noisy machine a run's two sides share
 * its load.
 */
export function ratioRow(of: RatioRowOf): BenchRow {
  const ratios = of.ratios ?? pairedRatios(of.service, of.raw, of.item);
  const r = spread(ratios);
  return {
    item: of.item,
    service: typeof of.service === "number" ? of.service : median(of.service),
    raw: typeof of.raw === "number" ? of.raw : median(of.raw),
    unit: of.unit,
    ratio: r.median,
    ...(ratios.length > 1 ? { range: [r.min, r.max] as [number, number] } : {}),
    target: of.target,
  };
}

function pairedRatios(service: Runs, raw: Runs, item: string): number[] {
  if (typeof service === "number" && typeof raw === "number") return [service / raw];
  if (typeof service === "number" || typeof raw === "number" || service.length !== raw.length) {
    throw new Error(`${item}: service and raw must be measured in the same runs to pair them`);
  }
  return service.map((s, i) => s / raw[i]!);
}
