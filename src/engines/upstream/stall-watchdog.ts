import { UpstreamUnavailable } from "./upstream-errors.ts";

/**
 * Bounds the silences of a streamed answer: `firstMs` until the first event (the upstream's prefill, which can be
 * long), then `idleMs` between events. When one runs out, `signal` aborts with a 503 overloaded naming the stall.
 */
export class StallWatchdog {
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout | null = null;
  readonly signal = this.controller.signal;

  constructor(
    firstMs: number,
    private readonly idleMs: number,
    private readonly origin: string,
  ) {
    this.arm(firstMs, `no first token within ${firstMs} ms`);
  }

  /** An event arrived: the idle clock starts again. */
  beat(): void {
    this.arm(this.idleMs, `the stream stalled: nothing for ${this.idleMs} ms`);
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private arm(ms: number, why: string): void {
    this.stop();
    this.timer = setTimeout(() => this.controller.abort(new UpstreamUnavailable(`The model's engine failed: ${why} (${this.origin}).`, null, 1000)), ms);
    this.timer.unref();
  }
}
