/**
 * A signal that aborts with its parent's reason, or on its own after `ms` (a `TimeoutError`, as
 * `AbortSignal.timeout` gives), until `dispose()` detaches it from both. It stands in for
 * `AbortSignal.any([parent, AbortSignal.timeout(ms)])` on the per-request path: on Node 22 that pair costs about
 * 20 µs of CPU, and the timeout's timer stays in the timer list for all of `ms` (minutes) after the call is over.
 */
export class LinkedAbort {
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout | null;
  readonly signal = this.controller.signal;
  /** Whether it was the `ms` bound that fired. */
  timedOut = false;

  constructor(
    private readonly parent: AbortSignal,
    ms: number | null,
  ) {
    if (parent.aborted) {
      this.timer = null;
      this.controller.abort(parent.reason);
      return;
    }
    // The object itself listens (handleEvent): a closure per instance would cost a defineProperty under tsx's keepNames.
    parent.addEventListener("abort", this, { once: true });
    this.timer = ms === null ? null : setTimeout(() => this.expire(ms), ms).unref();
  }

  /** Aborts the signal now (a watchdog's verdict, say), detaching it from the parent and the timer. */
  abort(reason: unknown): void {
    this.dispose();
    this.controller.abort(reason);
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.parent.removeEventListener("abort", this);
  }

  /** The parent aborted. */
  handleEvent(): void {
    this.abort(this.parent.reason);
  }

  private expire(ms: number): void {
    this.timedOut = true;
    this.abort(new DOMException(`The operation was aborted due to timeout (${ms} ms)`, "TimeoutError"));
  }
}
