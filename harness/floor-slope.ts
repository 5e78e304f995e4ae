/**
 * The slope of a series' floor: linear quantile regression at a low quantile, one line per group with its own
 * intercept and one slope shared by all (each group a stretch of readings between two faults). Memory read just after
 * a GC is the memory held plus what the requests in flight at that moment hold: noise on one side only, up to tens of
 * MB, while a leak raises the floor itself. Least squares follows the noise; the low quantile follows the floor.
 */

export interface Point {
  /** ms */
  t: number;
  y: number;
}

/** The lower τ-quantile of sorted values. */
const quantileOfSorted = (sorted: number[], tau: number) => sorted[Math.max(0, Math.ceil(tau * sorted.length) - 1)]!;

/** The check (pinball) loss of the fit with slope `b` (per ms), each group at its best intercept for that slope. */
function loss(groups: Point[][], tau: number, b: number): number {
  let sum = 0;
  for (const group of groups) {
    const residuals = group.map((p) => p.y - b * p.t);
    const intercept = quantileOfSorted([...residuals].sort((x, y) => x - y), tau);
    for (const r of residuals) sum += r >= intercept ? tau * (r - intercept) : (1 - tau) * (intercept - r);
  }
  return sum;
}

/**
 * The slope per second of the τ-quantile line (τ = 0.1 by default) fitted to the groups together, each with its own
 * intercept; NaN with fewer than 3 points. The loss is convex in the slope (a convex loss minimised over the
 * intercepts), so a ternary search finds it; the bracket is any slope a pair of points in a group shows.
 */
export function floorSlopePerSecond(groups: Point[][], tau = 0.1): number {
  const used = groups.filter((g) => g.length >= 2);
  if (used.reduce((n, g) => n + g.length, 0) < 3) return Number.NaN;
  let lo = 0;
  let hi = 0;
  for (const g of used) {
    for (let i = 1; i < g.length; i++) {
      const dt = g[i]!.t - g[i - 1]!.t;
      if (dt === 0) continue;
      const s = (g[i]!.y - g[i - 1]!.y) / dt;
      lo = Math.min(lo, s);
      hi = Math.max(hi, s);
    }
  }
  for (let i = 0; i < 200 && hi - lo > 1e-12 * Math.max(1, Math.abs(hi), Math.abs(lo)); i++) {
    const a = lo + (hi - lo) / 3;
    const b = hi - (hi - lo) / 3;
    if (loss(used, tau, a) <= loss(used, tau, b)) hi = b;
    else lo = a;
  }
  return ((lo + hi) / 2) * 1000;
}

/** A deterministic generator of numbers in [0, 1) (a linear congruential one): the same seed, the same sequence. */
export function seededRandom(seed: number): () => number {
  let s = seed;
  return () => (s = (s * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
}

/**
 * What the fit reads from noise alone: the floor slope of the same readings in shuffled order (the same values, no
 * trend left), `runs` times; the 5% and 95% of those slopes, per second. A slope inside that band cannot be told from
 * a flat series with this much noise. The shuffle is seeded, so a report reads the same when run again.
 */
export function shuffledFloorSlopeBand(points: Point[], runs = 200, tau = 0.1, seed = 1): { low: number; high: number } {
  const next = seededRandom(seed);
  const slopes: number[] = [];
  for (let run = 0; run < runs; run++) {
    const ys = points.map((p) => p.y);
    for (let i = ys.length - 1; i > 0; i--) {
      const j = Math.floor(next() * (i + 1));
      [ys[i], ys[j]] = [ys[j]!, ys[i]!];
    }
    slopes.push(floorSlopePerSecond([points.map((p, i) => ({ t: p.t, y: ys[i]! }))], tau));
  }
  slopes.sort((a, b) => a - b);
  return { low: slopes[Math.floor(0.05 * runs)]!, high: slopes[Math.ceil(0.95 * runs) - 1]! };
}
