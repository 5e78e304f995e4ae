/**
 * Text-level stop strings for the logprobs sampling loop: finds the first stop string in the generated text,
 * and holds back any tail that could still be the beginning of one, so it never reaches the client.
 */
export class StopMatcher {
  constructor(private readonly stops: readonly string[]) {}

  /**
   * Given the whole text so far and how much of it was already emitted, returns how far it is safe to emit and
   * whether a stop string was hit (then `safeEnd` is where it starts, and the stop text is excluded).
   */
  scan(text: string, emitted: number): { safeEnd: number; stopped: boolean } {
    let first = -1;
    for (const stop of this.stops) {
      // A stop may straddle the emitted boundary only if it was held back, so search from a little earlier.
      const at = text.indexOf(stop, Math.max(0, emitted - stop.length + 1));
      if (at >= 0 && (first < 0 || at < first)) first = at;
    }
    if (first >= 0) return { safeEnd: Math.max(emitted, first), stopped: true };
    let hold = 0;
    for (const stop of this.stops) {
      for (let n = Math.min(stop.length - 1, text.length); n > hold; n--) {
        if (text.endsWith(stop.slice(0, n))) {
          hold = n;
          break;
        }
      }
    }
    // A trailing U+FFFD is an incomplete UTF-8 sequence that the next token completes.
    if (text.endsWith("\uFFFD")) hold = Math.max(hold, 1);
    return { safeEnd: Math.max(emitted, text.length - hold), stopped: false };
  }
}
