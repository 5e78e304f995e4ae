/**
 * Stop sequences on generated text (§4.2 `stop`), for engines that decode text themselves (the llama logprobs
 * loop, the ONNX VLM): the first stop string ends the output and is never emitted, and an ending that could still
 * become a stop string is held back until the next tokens show it does not. A trailing U+FFFD (half of a
 * multi-byte character that the next token completes) is held back too.
 */

/**
 * Given the whole text so far and how much of it was already emitted, how far it is safe to emit and whether a
 * stop string was hit (then `safeEnd` is where it starts).
 */
export function scanStops(text: string, emitted: number, stops: readonly string[]): { safeEnd: number; stopped: boolean } {
  let first = -1;
  for (const stop of stops) {
    if (!stop) continue;
    // Emitted text never held a whole stop, so one can only begin within the held-back tail.
    const at = text.indexOf(stop, Math.max(0, emitted - stop.length + 1));
    if (at >= 0 && (first < 0 || at < first)) first = at;
  }
  if (first >= 0) return { safeEnd: Math.max(emitted, first), stopped: true };
  let safe = text.length - heldBack(text, stops);
  if (safe > 0 && text.charCodeAt(safe - 1) === 0xfffd) safe--;
  return { safeEnd: Math.max(emitted, safe), stopped: false };
}

/** Length of the longest end of `text` that is a proper prefix of a stop sequence. */
export function heldBack(text: string, stops: readonly string[]): number {
  let hold = 0;
  for (const s of stops) {
    for (let n = Math.min(s.length - 1, text.length); n > hold; n--) {
      if (text.endsWith(s.slice(0, n))) {
        hold = n;
        break;
      }
    }
  }
  return hold;
}

/** `scanStops` with the emitted length kept for the caller: feed it the growing text, get the new safe pieces. */
export class StopTextFilter {
  private emitted = 0;
  private done = false;

  constructor(private readonly stops: readonly string[]) {}

  get stopped(): boolean {
    return this.done;
  }

  /** Takes the whole decoded text so far; returns the new text that is safe to send (maybe ""). */
  push(text: string): string {
    if (this.done) return "";
    const { safeEnd, stopped } = scanStops(text, this.emitted, this.stops);
    this.done = stopped;
    return this.take(text, safeEnd);
  }

  /** At the end of generation (no stop hit): whatever was held back. */
  flush(text: string): string {
    if (this.done) return "";
    return this.take(text, text.length);
  }

  private take(text: string, end: number): string {
    if (end <= this.emitted) return "";
    const piece = text.slice(this.emitted, end);
    this.emitted = end;
    return piece;
  }
}
