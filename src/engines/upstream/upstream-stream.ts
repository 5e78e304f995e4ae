import { finished } from "node:stream/promises";
import type { EventSourceMessage } from "eventsource-parser";
import { SseReader } from "./sse-events.ts";
import type { UpstreamCall, UpstreamClient, UpstreamTimeouts } from "./upstream-client.ts";
import { readErrorBody, UpstreamUnavailable } from "./upstream-errors.ts";

/** What one streamed upstream call of a generation sends, how its events become deltas, and the deltas that close it. */
export interface GenerationCall<D> {
  call: Omit<UpstreamCall, "signal" | "streaming">;
  read(event: { error?: unknown }): D[];
  /** What the reader held back until the end. */
  flush(): D[];
  /** The `done` delta once the stream ended; throws when the upstream ended it before its finish. */
  done(): D;
}

type Bounds = Pick<UpstreamTimeouts, "firstByteMs" | "idleMs">;

/**
 * One streamed upstream call (chat or completions), as our deltas: the events of each read of the body turned into
 * deltas by `g.read`, one array per read, then what `g.flush` held back and `g.done`. The stream's silences are
 * bounded (CallBounds); an error event, a malformed event or any failure is mapped (`UpstreamUnavailable` when
 * retryable), after the deltas that came before it. The body is read here, not through another generator: each
 * layer of iteration is a step per read, and a stream has a read per token.
 */
export async function* streamedDeltas<D>(client: UpstreamClient, g: GenerationCall<D>, bounds: Bounds, signal: AbortSignal): AsyncGenerator<D[]> {
  const watch = client.boundsFor(signal, { firstMs: bounds.firstByteMs, idleMs: bounds.idleMs });
  try {
    const response = await client.send({ ...g.call, signal, streaming: watch });
    const sse = new SseReader();
    try {
      for await (const chunk of response.body) {
        const events = sse.feed(chunk);
        if (events.length === 0) continue;
        watch.beat();
        const deltas: D[] = [];
        const failure = readEvents(events, client.origin, g.read, deltas);
        // What came before a malformed or error event goes out first, as when each event was its own step.
        if (deltas.length > 0) yield deltas;
        if (failure !== null) throw failure;
      }
    } finally {
      if (!response.body.readableEnded) response.body.destroy();
    }
    const deltas: D[] = [];
    const failure = readEvents(sse.end(), client.origin, g.read, deltas);
    if (failure === null) for (const delta of g.flush()) deltas.push(delta);
    if (deltas.length > 0) yield deltas;
    if (failure !== null) throw failure;
  } catch (err) {
    throw client.failure(err, watch);
  } finally {
    watch.dispose();
  }
  yield [g.done()];
}

/**
 * The same call collected whole, for an answer nobody sees before its end (a buffered one): every delta in one
 * array, `done` last, with the same bounds and the same failures, and no step of an iteration per read.
 */
export async function collectedDeltas<D>(client: UpstreamClient, g: GenerationCall<D>, bounds: Bounds, signal: AbortSignal): Promise<D[]> {
  const watch = client.boundsFor(signal, { firstMs: bounds.firstByteMs, idleMs: bounds.idleMs });
  const deltas: D[] = [];
  try {
    const response = await client.send({ ...g.call, signal, streaming: watch });
    const sse = new SseReader();
    const body = response.body;
    // Read by a listener and awaited once: an async iteration would be a promise step per read.
    body.on("data", (chunk: Buffer) => {
      const events = sse.feed(chunk);
      if (events.length === 0) return;
      watch.beat();
      const failure = readEvents(events, client.origin, g.read, deltas);
      if (failure !== null) body.destroy(failure as Error);
    });
    try {
      await finished(body);
    } finally {
      if (!body.readableEnded) body.destroy();
    }
    const failure = readEvents(sse.end(), client.origin, g.read, deltas);
    if (failure !== null) throw failure;
  } catch (err) {
    throw client.failure(err, watch);
  } finally {
    watch.dispose();
  }
  for (const delta of g.flush()) deltas.push(delta);
  deltas.push(g.done());
  return deltas;
}

/** Parses one read's events into `deltas`; returns the failure that stopped it (an error or malformed event), or null. */
function readEvents<D>(events: readonly EventSourceMessage[], origin: string, read: (event: { error?: unknown }) => D[], deltas: D[]): unknown {
  for (const event of events) {
    try {
      const chunk = parseEvent(event.data, origin);
      if (chunk.error !== undefined) throw streamError(chunk.error, origin);
      for (const delta of read(chunk)) deltas.push(delta);
    } catch (err) {
      return err;
    }
  }
  return null;
}

/** The stream ended without its finish: an upstream that died mid-answer. */
export function endedEarly(origin: string): UpstreamUnavailable {
  return new UpstreamUnavailable("The model's engine ended the stream before it finished.", null, 1000, "overloaded", `${origin} ended the stream early`);
}

function parseEvent(data: string, origin: string): { error?: unknown } {
  try {
    return JSON.parse(data) as { error?: unknown };
  } catch {
    throw new UpstreamUnavailable("The model's engine sent a malformed stream event.", null, 1000, "overloaded", `malformed stream event from ${origin}: ${data.slice(0, 200)}`);
  }
}

/** An error event inside an upstream stream (vLLM, llama-server: `data: {"error": {...}}`). */
function streamError(error: unknown, origin: string): UpstreamUnavailable {
  const { message } = readErrorBody(JSON.stringify({ error }));
  return new UpstreamUnavailable("The model's engine failed during the stream.", null, 1000, "overloaded", `error event from ${origin}: ${message}`);
}
