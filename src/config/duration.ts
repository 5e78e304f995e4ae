const unitMs = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;

/** Parses the config's duration format ("500ms", "30s", "1m", "2h") into milliseconds. */
export function parseDuration(text: string): number {
  const match = /^([0-9]+)(ms|s|m|h)$/.exec(text);
  if (!match) throw new Error(`invalid duration "${text}" (use e.g. 500ms, 30s, 1m, 1h)`);
  return Number(match[1]) * unitMs[match[2] as keyof typeof unitMs];
}

/** The longest delay one Node timer holds (about 596 h): a longer one fires after 1 ms instead, with a warning. */
export const maxTimerMs = 2 ** 31 - 1;

/**
 * A duration some timer waits for (a timeout, a wait, an interval): beyond `maxTimerMs` it is `maxTimerMs`, so that
 * `requestTimeout: 1000h` means a very long time rather than a timer Node fires at once (or a RangeError in
 * `AbortSignal.timeout`).
 */
export function parseTimerDuration(text: string): number {
  return Math.min(parseDuration(text), maxTimerMs);
}

/** Formats whole seconds as the rate-limit reset string of §8: "1s", "6m0s", "1h2m3s". */
export function formatResetDuration(totalSeconds: number): string {
  const s = Math.max(0, Math.ceil(totalSeconds));
  const hours = Math.floor(s / 3600);
  const minutes = Math.floor((s % 3600) / 60);
  const seconds = s % 60;
  if (hours > 0) return `${hours}h${minutes}m${seconds}s`;
  if (minutes > 0) return `${minutes}m${seconds}s`;
  return `${seconds}s`;
}
