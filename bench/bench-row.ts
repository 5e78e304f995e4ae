/** One line of the benchmark table: the service's figure against the raw engine's, measured in the same run. */
export interface BenchRow {
  item: string;
  service: number;
  raw: number;
  unit: string;
  /** service / raw for throughput; for added-latency items the item says what it is. */
  ratio: number;
  /** The ratio's min and max over the runs, when the item was measured over several. */
  range?: [number, number];
  target: string;
}

/** min / median / max of a set of runs. */
export function spread(values: number[]): { min: number; median: number; max: number } {
  return { min: Math.min(...values), median: median(values), max: Math.max(...values) };
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}
