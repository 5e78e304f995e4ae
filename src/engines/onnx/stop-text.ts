/**
 * Turns the decoded text of a growing generation into stream deltas while honouring stop sequences (§4.2 `stop`):
 * the stop text is never emitted, and text that might be the start of a stop sequence is held back until the
 * next tokens show it is not. A trailing U+FFFD (half of a multi-byte character) is held back too.
 */
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
    const hit = firstStop(text, this.stops);
    if (hit !== -1) {
      this.done = true;
      return this.take(text, hit);
    }
    let safe = text.length - heldBack(text, this.stops);
    if (safe > 0 && text.charCodeAt(safe - 1) === 0xfffd) safe--;
    return this.take(text, safe);
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

/** Index where the first stop sequence starts, or -1. */
export function firstStop(text: string, stops: readonly string[]): number {
  let best = -1;
  for (const s of stops) {
    if (!s) continue;
    const i = text.indexOf(s);
    if (i !== -1 && (best === -1 || i < best)) best = i;
  }
  return best;
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
