import { createParser, type EventSourceMessage } from "eventsource-parser";

/**
 * The events of an upstream's `text/event-stream` body, as they arrive, up to `data: [DONE]`: one array per read of
 * the body (all the events it completed), so a whole answer that arrives in one read costs one step of the
 * iteration, not one per event. The body is still read to its end after `[DONE]` (the upstream ends it there), so
 * the connection goes back to the pool instead of being destroyed; read errors (our idle timeout, a reset) are
 * thrown to the caller.
 */
export async function* sseEvents(body: AsyncIterable<Uint8Array>): AsyncGenerator<EventSourceMessage[]> {
  let pending: EventSourceMessage[] = [];
  let done = false;
  const parser = createParser({ onEvent: (event) => (event.data === "[DONE]" ? (done = true) : done || pending.push(event)) });
  const decoder = new TextDecoder();
  for await (const chunk of body) {
    parser.feed(decoder.decode(chunk, { stream: true }));
    if (pending.length > 0) {
      const batch = pending;
      pending = [];
      yield batch;
    }
  }
  parser.feed(`${decoder.decode()}\n\n`);
  if (pending.length > 0) yield pending;
}
