import { StringDecoder } from "node:string_decoder";
import { createParser, type EventSourceMessage } from "eventsource-parser";

/** What a read that completed no event gives: one empty array, never the one the next events go into. */
const none: readonly EventSourceMessage[] = Object.freeze([]);

/**
 * The events of an upstream's `text/event-stream` body, up to `data: [DONE]`: each read of the body in (`feed`), the
 * events it completed out, so a whole answer that arrives in one read is one batch, not one step per event. The
 * caller reads the body to its end after `[DONE]` (the upstream ends it there), so the connection goes back to the
 * pool instead of being destroyed; `end` gives what a body that stopped without a blank line completed.
 */
export class SseReader {
  private pending: EventSourceMessage[] = [];
  private done = false;
  /**
   * Node's StringDecoder, not a streaming TextDecoder: both keep a character split across two reads whole, and the
   * parser strips a leading BOM itself, but TextDecoder's streaming mode goes through ICU (about 3 µs for a 4-KB
   * answer against 1 µs).
   */
  private readonly decoder = new StringDecoder("utf8");
  private readonly parser = createParser({ onEvent: (event) => this.add(event) });

  feed(chunk: Uint8Array): readonly EventSourceMessage[] {
    this.parser.feed(this.decoder.write(chunk));
    return this.take();
  }

  end(): readonly EventSourceMessage[] {
    this.parser.feed(`${this.decoder.end()}\n\n`);
    return this.take();
  }

  private add(event: EventSourceMessage): void {
    if (event.data === "[DONE]") this.done = true;
    else if (!this.done) this.pending.push(event);
  }

  private take(): readonly EventSourceMessage[] {
    if (this.pending.length === 0) return none;
    const batch = this.pending;
    this.pending = [];
    return batch;
  }
}
