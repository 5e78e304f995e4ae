import { LinkedAbort } from "./linked-abort.ts";
import { UpstreamUnavailable } from "./upstream-errors.ts";

/**
 * Bounds the silences of a streamed answer: `firstMs` until the first event (the upstream's prefill, which can be
 * long), then `idleMs` between events. When one runs out, `signal` aborts with a 503 overloaded naming the stall.
 * One timer per stream, refreshed per event rather than replaced (a stream has an event per token). `signal` also
 * follows the caller's signal, so it is the one signal the call needs.
 */
export class StallWatchdog {
  private readonly link: LinkedAbort;
  private timer: NodeJS.Timeout;
  private idle = false;
  readonly signal: AbortSignal;

  constructor(
    caller: AbortSignal,
    firstMs: number,
    private readonly idleMs: number,
  ) {
    this.link = new LinkedAbort(caller, null);
    this.signal = this.link.signal;
    this.timer = this.arm(firstMs, `no first token within ${firstMs} ms`);
  }

  /** An event arrived: the idle clock starts again. */
  beat(): void {
    if (this.idle) {
      this.timer.refresh();
      return;
    }
    clearTimeout(this.timer);
    this.idle = true;
    this.timer = this.arm(this.idleMs, `the stream stalled: nothing for ${this.idleMs} ms`);
  }

  stop(): void {
    clearTimeout(this.timer);
    this.link.dispose();
  }

  private arm(ms: number, why: string): NodeJS.Timeout {
    const timer = setTimeout(() => this.link.abort(new UpstreamUnavailable(`The model's engine failed: ${why}.`, null, 1000, "overloaded", why)), ms);
    timer.unref();
    return timer;
  }
}
