/**
 * Runs the sides one after another, in the order they are measured, round after round, until each has run for
 * `seconds` in all. V8 optimises a gateway's per-request path over the first seconds of load (about 10 s on the
 * shared 2-core machine, bench/upstream.bench.ts), so the runs measured after it compare steady states.
 */
export async function warmUp(sides: readonly (() => Promise<unknown>)[], seconds: number): Promise<void> {
  const spent = sides.map(() => 0);
  while (spent.some((ms) => ms < seconds * 1000)) {
    for (const [i, side] of sides.entries()) {
      if (spent[i]! >= seconds * 1000) continue;
      const started = performance.now();
      await side();
      spent[i]! += performance.now() - started;
    }
  }
}
