import type { TokenLogprob } from "../../engines/engine.ts";

type Kind = "content" | "reasoning";

/**
 * Paces streamed text: the first piece goes out at once (time to first token is untouched); after that, text
 * that arrives within `windowMs` of the last event is merged into the next one. One SSE event per few tokens
 * instead of one per token halves the per-token cost (JSON, TLS record, syscall, client parse) that otherwise
 * competes with generation for the event loop, at a latency cost of a few milliseconds.
 */
export class StreamBatcher {
  private kind: Kind | null = null;
  private text = "";
  private logprobs: TokenLogprob[] = [];
  private lastSent = 0;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly emit: (kind: Kind, text: string, logprobs: TokenLogprob[]) => void,
    private readonly windowMs = 8,
  ) {}

  add(kind: Kind, text: string, logprobs: TokenLogprob[] = []): void {
    if (this.kind !== null && this.kind !== kind) this.flush();
    this.kind = kind;
    this.text += text;
    this.logprobs.push(...logprobs);
    if (this.timer) return;
    const wait = this.lastSent + this.windowMs - performance.now();
    if (wait <= 0) this.flush();
    else this.timer = setTimeout(() => this.flush(), wait);
  }

  /** Sends whatever is pending; call before any other event and at the end. */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.kind === null) return;
    const { kind, text, logprobs } = this;
    this.kind = null;
    this.text = "";
    this.logprobs = [];
    this.lastSent = performance.now();
    if (text.length > 0 || logprobs.length > 0) this.emit(kind, text, logprobs);
  }
}
