import type { CompletionLogprob } from "../../engines/engine.ts";
import type { CompletionLogprobs } from "./completions.schema.ts";

/**
 * OpenAI's legacy logprobs for one choice, built as its text grows: each token's string, logprob and the most
 * likely tokens at its place (with the chosen token among them, as OpenAI lists it), and its character offset in
 * the choice's text. Offsets count the token strings from where their piece of text starts, bounded by where it
 * ends (a token's string may differ from the text it made: a leading space the tokenizer adds, a held stop).
 */
export class LegacyLogprobs {
  private readonly parts: CompletionLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  private taken = 0;
  private textLength = 0;

  /** Adds `text` to the choice, with the logprobs of the tokens that made it. */
  add(text: string, entries: readonly CompletionLogprob[]): void {
    const start = this.textLength;
    this.textLength += text.length;
    let offset = start;
    for (const entry of entries) {
      this.parts.tokens.push(entry.token);
      this.parts.token_logprobs.push(entry.logprob);
      this.parts.top_logprobs.push(entry.logprob === null ? null : topOf(entry));
      this.parts.text_offset.push(Math.min(offset, this.textLength));
      offset += entry.token.length;
    }
  }

  /** Everything added so far. */
  all(): CompletionLogprobs {
    return this.parts;
  }

  /** What was added since the last call (a streamed event's part). */
  take(): CompletionLogprobs {
    const from = this.taken;
    this.taken = this.parts.tokens.length;
    return {
      tokens: this.parts.tokens.slice(from),
      token_logprobs: this.parts.token_logprobs.slice(from),
      top_logprobs: this.parts.top_logprobs.slice(from),
      text_offset: this.parts.text_offset.slice(from),
    };
  }
}

/** The alternatives by token string (the first of equal strings kept), built with own properties (a token may be `__proto__`). */
function topOf(entry: CompletionLogprob): Record<string, number> {
  const top = new Map<string, number>();
  for (const alternative of entry.top) if (!top.has(alternative.token)) top.set(alternative.token, alternative.logprob);
  if (!top.has(entry.token) && entry.logprob !== null) top.set(entry.token, entry.logprob);
  return Object.fromEntries(top);
}
