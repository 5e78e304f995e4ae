import { createParser, type EventSourceMessage } from "eventsource-parser";

/**
 * The events of an upstream's `text/event-stream` body, up to `data: [DONE]`: each read of the body in (`feed`), the
 * events it completed out, so a whole answer that arrives in one read is one batch, not one step per event. The
 * caller reads the body to its end after `[DONE]` (the upstream ends it there), so the connection goes back to the
 * pool instead of being destroyed; `end` gives what a body that stopped without a blank line completed.
 */
export class SseReader {
  private pending: EventSourceMessage[] = [];
  private done = false;
  private readonly decoder = new TextDecoder();
  private readonly parser = createParser({ onEvent: (event) => this.add(event) });

  feed(chunk: Uint8Array): EventSourceMessage[] {
    this.parser.feed(this.decoder.decode(chunk, { stream: true }));
    return this.take();
  }

  end(): EventSourceMessage[] {
    this.parser.feed(`${this.decoder.decode()}\n\n`);
    return this.take();
  }

  private add(event: EventSourceMessage): void {
    if (event.data === "[DONE]") this.done = true;
    else if (!this.done) this.pending.push(event);
  }

  private take(): EventSourceMessage[] {
    if (this.pending.length === 0) return this.pending;
    const batch = this.pending;
    this.pending = [];
    return batch;
  }
}
