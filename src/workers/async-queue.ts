/**
 * Turns callbacks into an AsyncIterable: the producer pushes items and finishes or fails once; one consumer
 * iterates. Unbounded: its producers are bounded (a generation by its max_tokens, a worker task by its input).
 * The llama engine's deltas and the worker pool's streamed events go through it.
 */
export class AsyncQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private ended = false;
  private error: unknown = null;
  private wake: (() => void) | null = null;
  private wakeScheduled = false;

  /**
   * `wakeNextTurn`: the waiting consumer is woken on the next event-loop turn (setImmediate), not in the producer's
   * own microtask run. A producer that goes on with work of its own after a push (LlamaChat queueing the next
   * token's decode) then gets there before the consumer's steps interleave with its own.
   */
  constructor(private readonly options: { wakeNextTurn?: boolean } = {}) {}

  push(item: T): void {
    if (this.ended) return;
    this.items.push(item);
    this.notify();
  }

  end(error: unknown = null): void {
    if (this.ended) return;
    this.ended = true;
    this.error = error;
    this.notify();
  }

  private notify(): void {
    if (!this.options.wakeNextTurn) return this.wakeNow();
    if (this.wakeScheduled) return;
    this.wakeScheduled = true;
    setImmediate(() => {
      this.wakeScheduled = false;
      this.wakeNow();
    });
  }

  private wakeNow(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      if (this.items.length > 0) {
        yield this.items.shift()!;
        continue;
      }
      if (this.ended) {
        if (this.error !== null) throw this.error;
        return;
      }
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }
}
