import { sseEvents } from "./sse-events.ts";
import { StallWatchdog } from "./stall-watchdog.ts";
import type { UpstreamCall, UpstreamClient, UpstreamResponse, UpstreamTimeouts } from "./upstream-client.ts";
import { readErrorBody, UpstreamUnavailable } from "./upstream-errors.ts";

/**
 * One streamed upstream call (chat or completions), as our deltas: the events of each read of the body parsed and
 * turned into deltas by `read`, one array per read (a buffered answer collects them without a step per delta).
 * The stream's silences are bounded (StallWatchdog); an error event, a malformed event or any failure is mapped
 * (`UpstreamUnavailable` when retryable), after the deltas that came before it.
 */
export async function* streamedDeltas<D>(
  client: UpstreamClient,
  call: Omit<UpstreamCall, "signal" | "streaming">,
  timeouts: Pick<UpstreamTimeouts, "firstByteMs" | "idleMs">,
  signal: AbortSignal,
  read: (event: { error?: unknown }) => D[],
): AsyncGenerator<D[]> {
  const watchdog = new StallWatchdog(signal, timeouts.firstByteMs, timeouts.idleMs);
  const callSignal = watchdog.signal;
  let response: UpstreamResponse | null = null;
  try {
    response = await client.send({ ...call, signal: callSignal, streaming: true });
    try {
      for await (const events of sseEvents(response.body)) {
        watchdog.beat();
        const deltas: D[] = [];
        let failure: unknown = null;
        for (const event of events) {
          try {
            const chunk = parseEvent(event.data, client.origin);
            if (chunk.error !== undefined) throw streamError(chunk.error, client.origin);
            for (const delta of read(chunk)) deltas.push(delta);
          } catch (err) {
            failure = err;
            break;
          }
        }
        // What came before a malformed or error event goes out first, as when each event was its own step.
        if (deltas.length > 0) yield deltas;
        if (failure !== null) throw failure;
      }
    } finally {
      if (!response.body.readableEnded) response.body.destroy();
    }
  } catch (err) {
    throw client.failure(err, callSignal, response?.total ?? null);
  } finally {
    watchdog.stop();
  }
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
