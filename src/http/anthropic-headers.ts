/*
 * Anthropic's rate-limit headers beside ours: `anthropic-ratelimit-requests-{limit,remaining,reset}` and, when the
 * plan meters tokens, `anthropic-ratelimit-tokens-{limit,remaining,reset}`, read from our `x-ratelimit-*` ones (its
 * resets are RFC 3339 times, ours durations); and a Retry-After on every answer.
 */

type Headers = Record<string, string | number | string[] | undefined>;

const families = [
  { ours: "requests", theirs: "requests" },
  { ours: "tokens", theirs: "tokens" },
] as const;

/** Seconds in one of our reset durations ("1h2m3s", "6m0s", "59s"); null when it is not one. */
export function durationSeconds(value: string): number | null {
  const match = /^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?$/.exec(value);
  if (!match || value.length === 0) return null;
  return Number(match[1] ?? 0) * 3600 + Number(match[2] ?? 0) * 60 + Number(match[3] ?? 0);
}

function text(value: Headers[string]): string | null {
  return typeof value === "string" || typeof value === "number" ? String(value) : null;
}

/**
 * The Anthropic headers for an answer carrying `headers` (ours), at `now`. Retry-After, when the answer has none (a
 * 429 or 529 has its own), is the seconds until the key's request window admits another request: 0 while it has
 * requests left, which is what it says on a 200.
 */
export function anthropicHeaders(headers: Headers, now: number): Record<string, string> {
  const out: Record<string, string> = {};
  for (const { ours, theirs } of families) {
    const limit = text(headers[`x-ratelimit-limit-${ours}`]);
    const remaining = text(headers[`x-ratelimit-remaining-${ours}`]);
    const reset = durationSeconds(text(headers[`x-ratelimit-reset-${ours}`]) ?? "");
    if (limit !== null) out[`anthropic-ratelimit-${theirs}-limit`] = limit;
    if (remaining !== null) out[`anthropic-ratelimit-${theirs}-remaining`] = remaining;
    if (reset !== null) out[`anthropic-ratelimit-${theirs}-reset`] = new Date(Math.ceil(now / 1000 + reset) * 1000).toISOString().replace(".000Z", "Z");
  }
  if (text(headers["retry-after"]) === null) {
    const spent = text(headers["x-ratelimit-remaining-requests"]) === "0";
    const reset = durationSeconds(text(headers["x-ratelimit-reset-requests"]) ?? "") ?? 0;
    out["retry-after"] = String(spent ? Math.max(1, Math.ceil(reset)) : 0);
  }
  return out;
}
