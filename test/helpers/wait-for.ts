/**
 * Polls `probe` until `ok` holds for its value, and returns that value. It gives up only after a probe that
 * started past the deadline has failed, so a wait is never weaker than a fixed sleep of `ms` followed by the same
 * check, and it returns as soon as the condition holds.
 */
export async function waitFor<T>(probe: () => T | Promise<T>, ok: (value: T) => boolean, what: string, ms = 30_000, every = 50): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const startedLate = Date.now() > deadline;
    const value = await probe();
    if (ok(value)) return value;
    if (startedLate) throw new Error(`timed out after ${ms} ms waiting for ${what}; last: ${describe(value)}`);
    await new Promise((r) => setTimeout(r, every));
  }
}

/** Polls a condition; see `waitFor`. */
export async function until(condition: () => boolean | Promise<boolean>, what: string, ms = 30_000, every = 50): Promise<void> {
  await waitFor(condition, (v) => v, what, ms, every);
}

function describe(value: unknown): string {
  try {
    return JSON.stringify(value)?.slice(0, 500) ?? String(value);
  } catch {
    return String(value);
  }
}
