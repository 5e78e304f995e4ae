import type { FastifyReply } from "fastify";
import { AppError } from "../errors/app-error.ts";
import { toEnvelope } from "../errors/envelope.ts";
import { stopRequest } from "./request-signal.ts";

/** How often a queued stream sends `: keep-alive` before its first frame. */
export const defaultKeepAliveMs = 15_000;

/** The streams that are open, so a shutdown can end each with an error event instead of a reset. */
export class OpenStreams {
  private readonly streams = new Set<SseStream>();

  add(stream: SseStream): void {
    this.streams.add(stream);
  }

  delete(stream: SseStream): void {
    this.streams.delete(stream);
  }

  get size(): number {
    return this.streams.size;
  }

  /** Ends every open stream with one error event (no [DONE]); resolves once they are written out (or `ms` passed). */
  failAll(error: AppError, ms = 1000): Promise<void> {
    const written = [...this.streams].map((stream) => stream.failAndFlush(error));
    return Promise.race([Promise.all(written).then(() => undefined), new Promise<void>((resolve) => setTimeout(resolve, ms).unref())]);
  }
}

/** One event: its data, named with `event:` where the wire format names its events. */
export interface StreamEvent {
  event?: string;
  data: unknown;
}

/** An event as it goes on the wire: `event: <name>` where it has one, then `data: <json>`. */
function frameOf({ event, data }: StreamEvent): string {
  return `${event ? `event: ${event}\n` : ""}data: ${JSON.stringify(data)}\n\n`;
}

/** The last event of a stream that fails after it began: §6's error frame, or a wire format's own (`response.failed`). */
export type FailureFrame = (err: AppError) => StreamEvent;

const chatFailure: FailureFrame = (err) => ({ data: toEnvelope(err) });

/**
 * The one place that writes server-sent events (spec §6): `data: <json>\n\n` frames (named with `event:` for the
 * Responses API), `: keep-alive` comments, the error frame (decisions.md) and `data: [DONE]`. Headers are
 * committed lazily, on the first frame, so an error before the first token can still be a normal JSON error
 * response.
 */
export class SseStream {
  private opened = false;
  private ended = false;
  private keepAliveTimer: NodeJS.Timeout | null = null;
  private corked = false;

  constructor(
    private readonly reply: FastifyReply,
    private readonly keepAliveMs = defaultKeepAliveMs,
    private readonly registry: OpenStreams | null = null,
    private readonly failureFrame: FailureFrame = chatFailure,
    /** What keeps a queued stream alive: a `: keep-alive` comment, or a wire format's own event (Anthropic's `ping`). */
    private readonly keepAliveEvent: StreamEvent | null = null,
  ) {}

  /** True once the status line and headers have gone out; errors must then be error frames. */
  get committed(): boolean {
    return this.opened;
  }

  get closed(): boolean {
    return this.ended || this.reply.raw.destroyed;
  }

  private open(): void {
    if (this.opened) return;
    this.opened = true;
    this.registry?.add(this);
    this.reply.hijack();
    const headers: Record<string, string | number | string[]> = {};
    for (const [name, value] of Object.entries(this.reply.getHeaders())) {
      if (value !== undefined) headers[name] = value as string | number | string[];
    }
    this.reply.raw.writeHead(200, {
      ...headers,
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      // No Connection header of ours: Node answers keep-alive, or close when the client asked to close, and then
      // closes the socket after [DONE].
      "x-accel-buffering": "no",
    });
  }

  private write(text: string): void {
    if (this.closed) return;
    this.open();
    const raw = this.reply.raw;
    // The frames written in one tick (a stream's opening events, its closing ones) leave as one TLS record and one
    // syscall, not one each: on a short answer the per-write cost is most of the stream's CPU.
    if (!this.corked) {
      this.corked = true;
      raw.cork();
      process.nextTick(() => this.uncork());
    }
    raw.write(text);
  }

  private uncork(): void {
    if (!this.corked) return;
    this.corked = false;
    this.reply.raw.uncork();
  }

  /** While the request waits for its first token, send `: keep-alive` every 15 s so proxies keep the connection. */
  keepAliveUntilFirstFrame(): void {
    if (this.keepAliveTimer || this.opened) return;
    const frame = this.keepAliveEvent ? frameOf(this.keepAliveEvent) : ": keep-alive\n\n";
    this.keepAliveTimer = setInterval(() => this.write(frame), this.keepAliveMs);
    this.keepAliveTimer.unref();
  }

  private stopKeepAlive(): void {
    if (this.keepAliveTimer) clearInterval(this.keepAliveTimer);
    this.keepAliveTimer = null;
  }

  send(chunk: unknown): void {
    this.stopKeepAlive();
    this.write(frameOf({ data: chunk }));
  }

  /** A named event: `event: <name>` then its data (the Responses API names every event by its type). */
  sendEvent(event: string, data: unknown): void {
    this.stopKeepAlive();
    this.write(frameOf({ event, data }));
  }

  /** Ends a stream normally with `data: [DONE]`. */
  done(): void {
    this.stopKeepAlive();
    this.write("data: [DONE]\n\n");
    this.end();
  }

  /** Ends a stream whose format has its own last event (the Responses API's `response.completed`): no [DONE]. */
  close(): void {
    this.stopKeepAlive();
    this.end();
  }

  /** An error after the stream has begun: one error frame, then close without [DONE]. */
  fail(err: AppError): void {
    this.stopKeepAlive();
    this.write(frameOf(this.failureFrame(err)));
    this.end();
  }

  /** `fail` (and stop the generation behind it), resolving when the response has been handed to the socket in full. */
  failAndFlush(err: AppError): Promise<void> {
    const raw = this.reply.raw;
    const finished = raw.writableFinished || raw.destroyed ? Promise.resolve() : new Promise<void>((resolve) => raw.once("close", resolve).once("finish", resolve));
    this.fail(err);
    stopRequest(this.reply);
    return finished;
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    this.registry?.delete(this);
    // Before end(): Node sends the chunked terminator ahead of what a corked response still holds.
    this.uncork();
    if (this.opened && !this.reply.raw.destroyed) this.reply.raw.end();
  }

  /** Stops timers; for paths that end without any frame (the error went out as JSON). */
  dispose(): void {
    this.stopKeepAlive();
    this.registry?.delete(this);
  }
}
