import { createParser, type EventSourceMessage } from "eventsource-parser";

/**
 * The events of an upstream's `text/event-stream` body, as they arrive. Ends at `data: [DONE]` or at the end of
 * the body; read errors (our idle timeout, a reset) are thrown to the caller.
 */
export async function* sseEvents(body: AsyncIterable<Uint8Array>): AsyncGenerator<EventSourceMessage> {
  const pending: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (event) => pending.push(event) });
  const decoder = new TextDecoder();
  for await (const chunk of body) {
    parser.feed(decoder.decode(chunk, { stream: true }));
    while (pending.length > 0) {
      const event = pending.shift()!;
      if (event.data === "[DONE]") return;
      yield event;
    }
  }
  parser.feed(decoder.decode());
  parser.feed("\n\n");
  for (const event of pending) {
    if (event.data === "[DONE]") return;
    yield event;
  }
}
