import { createParser, type EventSourceMessage } from "eventsource-parser";

/**
 * The events of an upstream's `text/event-stream` body, as they arrive, up to `data: [DONE]`. The body is still
 * read to its end after `[DONE]` (the upstream ends it there), so the connection goes back to the pool instead of
 * being destroyed; read errors (our idle timeout, a reset) are thrown to the caller.
 */
export async function* sseEvents(body: AsyncIterable<Uint8Array>): AsyncGenerator<EventSourceMessage> {
  const pending: EventSourceMessage[] = [];
  let done = false;
  const parser = createParser({ onEvent: (event) => (event.data === "[DONE]" ? (done = true) : done || pending.push(event)) });
  const decoder = new TextDecoder();
  for await (const chunk of body) {
    parser.feed(decoder.decode(chunk, { stream: true }));
    while (pending.length > 0) yield pending.shift()!;
  }
  parser.feed(`${decoder.decode()}\n\n`);
  yield* pending;
}
