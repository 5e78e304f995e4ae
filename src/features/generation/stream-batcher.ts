import type { ChatDelta } from "../../engines/engine.ts";

/** The deltas that carry streamed output; `done` is not paced. */
export type OutputDelta = Exclude<ChatDelta, { type: "done" }>;

/** Whether `next` continues `last`: text of the same kind, or argument fragments of the same tool call. */
function merges(last: OutputDelta, next: OutputDelta): boolean {
  if (last.type === "content" && next.type === "content") return true;
  if (last.type === "reasoning" && next.type === "reasoning") return true;
  return last.type === "tool_call" && next.type === "tool_call" && next.id === undefined && last.index === next.index;
}

function merge(last: OutputDelta, next: OutputDelta): OutputDelta {
  switch (last.type) {
    case "content": {
      const n = next as typeof last;
      const logprobs = last.logprobs || n.logprobs ? [...(last.logprobs ?? []), ...(n.logprobs ?? [])] : undefined;
      return { type: "content", text: last.text + n.text, ...(logprobs ? { logprobs } : {}) };
    }
    case "reasoning":
      return { type: "reasoning", text: last.text + (next as typeof last).text };
    case "tool_call":
      return { ...last, arguments: last.arguments + (next as typeof last).arguments };
  }
}

/**
 * The one text coalescer of the streaming path. The first run of output (what the engine had at once: one token on
 * the in-process engines, one read of an upstream's stream) goes out at once, its deltas merged, so time to first
 * token is untouched; after that, deltas that continue the pending one (text of the same kind, fragments of the same
 * tool call) and arrive within `windowMs` of the last event are merged into the next event. One SSE event per few
 * tokens instead of one per token cuts the per-token cost (JSON, TLS record, syscall, client parse) that otherwise
 * competes with generation for the event loop, and a slow client gets fewer, larger writes, not more.
 */
export class StreamBatcher {
  private pending: OutputDelta | null = null;
  private lastSent = Number.NEGATIVE_INFINITY;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly emit: (delta: OutputDelta) => void,
    private readonly windowMs = 8,
  ) {}

  /** One delta that is a run of its own. */
  add(delta: OutputDelta): void {
    this.push(delta);
    this.endRun();
  }

  /** A delta of the current run: merged into the pending one where it continues it, else the pending one goes first. */
  push(delta: OutputDelta): void {
    if (this.pending && merges(this.pending, delta)) this.pending = merge(this.pending, delta);
    else {
      this.flush();
      this.pending = delta;
    }
  }

  /** The run's deltas are in: what is pending goes out now when the window since the last event has passed, else at its end. */
  endRun(): void {
    if (this.timer || !this.pending) return;
    const wait = this.lastSent + this.windowMs - performance.now();
    if (wait <= 0) this.flush();
    else this.timer = setTimeout(() => this.flush(), wait);
  }

  /** Sends whatever is pending; call before any other event and at the end. */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const pending = this.pending;
    if (!pending) return;
    this.pending = null;
    this.lastSent = performance.now();
    if (pending.type === "tool_call" || pending.text.length > 0 || (pending.type === "content" && pending.logprobs?.length)) this.emit(pending);
  }
}
