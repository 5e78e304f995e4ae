import { maxTimerMs } from "../../config/duration.ts";
import { UpstreamUnavailable } from "./upstream-errors.ts";

/**
 * Every bound of one upstream call on one signal and one timer: the caller's abort (its reason passes through), the
 * call's total time, and for a streamed answer its silences (`firstMs` until the first event, the upstream's prefill,
 * then `idleMs` between events). A bound that runs out aborts `signal` with the 503 overloaded that names it.
 *
 * It stands in for AbortSignal.any over the caller and AbortSignal.timeout (about 20 µs of CPU on Node 22, and a timer
 * left in the list for minutes after the call) and for a timer re-armed per event (a stream has an event per token):
 * an event only notes the time, and the one timer, set for the nearest deadline, re-arms itself when it finds the
 * deadline moved.
 */
export class CallBounds {
  private readonly controller = new AbortController();
  readonly signal = this.controller.signal;
  private timer: NodeJS.Timeout | null = null;
  private readonly totalAt: number;
  private readonly silence: { firstMs: number; idleMs: number } | null;
  private lastEventAt: number;
  /** Whether an event has come: the bound on silence is then `idleMs`, not `firstMs`. */
  private heard = false;
  private disposed = false;

  /** `silences`: bound the silences of a streamed answer, `firstMs` until the first `beat()`, then `idleMs` between beats. */
  constructor(
    private readonly caller: AbortSignal,
    private readonly totalMs: number,
    silences: { firstMs: number; idleMs: number } | null = null,
  ) {
    this.lastEventAt = performance.now();
    this.totalAt = this.lastEventAt + totalMs;
    this.silence = silences;
    if (caller.aborted) {
      this.disposed = true;
      this.controller.abort(caller.reason);
      return;
    }
    // The object itself listens (handleEvent): a closure per instance would cost a defineProperty under tsx's keepNames.
    caller.addEventListener("abort", this, { once: true });
    this.arm();
  }

  /** An event arrived: the idle clock starts again. */
  beat(): void {
    if (this.silence === null) return;
    this.lastEventAt = performance.now();
    this.heard = true;
  }

  /** Aborts now with `reason`, detached from the caller and the timer. */
  abort(reason: unknown): void {
    this.dispose();
    if (!this.signal.aborted) this.controller.abort(reason);
  }

  /** The call is over: nothing aborts the signal any more. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    if (this.timer) clearTimeout(this.timer);
    this.caller.removeEventListener("abort", this);
  }

  /** The caller aborted. */
  handleEvent(): void {
    this.abort(this.caller.reason);
  }

  /** The first deadline to come, and the failure it means. */
  private nextDeadline(): { at: number; failure: () => UpstreamUnavailable } {
    const total = { at: this.totalAt, failure: () => unavailable(`The model's engine did not finish within ${this.totalMs} ms.`, "total timeout") };
    if (this.silence === null) return total;
    const { firstMs, idleMs } = this.silence;
    const silence =
      !this.heard
        ? { at: this.lastEventAt + firstMs, failure: () => unavailable(`The model's engine failed: no first token within ${firstMs} ms.`, `no first token within ${firstMs} ms`) }
        : { at: this.lastEventAt + idleMs, failure: () => unavailable(`The model's engine failed: the stream stalled: nothing for ${idleMs} ms.`, `the stream stalled: nothing for ${idleMs} ms`) };
    return silence.at < total.at ? silence : total;
  }

  /** Sets the one timer for the nearest deadline (at the start, and when the timer found the deadline moved on). */
  private arm(): void {
    const { at } = this.nextDeadline();
    // Node fires a longer delay than a timer holds (2^31 - 1 ms, 24.8 days) after 1 ms. The config holds its timer
    // durations there (parseTimerDuration); a caller that passes more still waits, in steps.
    this.timer = setTimeout(() => this.fire(), Math.min(maxTimerMs, Math.max(0, at - performance.now()))).unref();
  }

  /** The timer fired: abort if the nearest deadline has passed, or wait for it (a beat moved it on). */
  private fire(): void {
    this.timer = null;
    const { at, failure } = this.nextDeadline();
    // Node may fire a timer up to a millisecond before its time by performance.now().
    if (performance.now() >= at - 1) this.abort(failure());
    else this.arm();
  }
}

function unavailable(message: string, detail: string): UpstreamUnavailable {
  return new UpstreamUnavailable(message, null, 1000, "overloaded", detail);
}
