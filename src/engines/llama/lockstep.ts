import type { LlamaContextSequence } from "node-llama-cpp";

type TokenIterator = AsyncGenerator<unknown, unknown, unknown>;
type Step = { value: unknown; inner: TokenIterator; sequenceId: number; resolve: (r: IteratorResult<unknown>) => void; reject: (e: unknown) => void };

/**
 * Makes every decode of a context carry the next token of every sequence that is generating, as llama-server's
 * loop does. node-llama-cpp batches whatever sequences have queued a token when its dispatcher looks, but each
 * sequence samples in its own native job and queues its next token as soon as its own sample is back; the
 * dispatcher then decodes the early ones while the last is still sampling, and that one waits for the next
 * decode. With 4 sequences every decode carried 3 tokens (a third more decodes than needed).
 *
 * The gate holds a sequence's request for its next token until no token of the current step is still on its way
 * and every open generation has asked (or one event-loop turn has passed, so a generation that stalls on
 * something else does not hold the others back); then it lets them all through together. A single generation
 * never waits. Requests arriving in the same event-loop turn as a release join it (node-llama-cpp dispatches on
 * the next turn).
 */
export class Lockstep {
  /** Open token iterators (generations in progress). */
  private open = 0;
  /** Iterators whose token is being decoded or sampled. */
  private inFlight = 0;
  private waiting: Step[] = [];
  /** True from a release until the end of that event-loop turn: later requests join the released step. */
  private joining = false;
  private fallback: NodeJS.Immediate | null = null;

  /** Steps released, and token requests released in them (their ratio is the tokens per decode). */
  private steps = 0;
  private requests = 0;

  /** Open generations (zero once every request has ended, aborted or not), steps and requests released. */
  get stats(): { generations: number; steps: number; tokens: number } {
    return { generations: this.open, steps: this.steps, tokens: this.requests };
  }

  /**
   * Routes the sequence's token iterators (LlamaChat's and the logprobs loop's) through the gate. `sequenceId` is
   * the sequence's id in its context: node-llama-cpp gives a fresh context's sequences 0, 1, 2... in the order
   * `getSequence()` is called (the id itself is not public).
   */
  attach(sequence: LlamaContextSequence, sequenceId: number): void {
    const evaluateWithMetadata = sequence.evaluateWithMetadata.bind(sequence);
    sequence.evaluateWithMetadata = ((...args: Parameters<typeof evaluateWithMetadata>) =>
      this.wrap(evaluateWithMetadata(...args) as TokenIterator, sequenceId)) as typeof sequence.evaluateWithMetadata;
  }

  private wrap(inner: TokenIterator, sequenceId: number): TokenIterator {
    let closed = false;
    this.open++;
    const close = () => {
      if (closed) return;
      closed = true;
      this.open--;
      // A request still waiting for this iterator's next token ends with it.
      const mine = this.waiting.filter((step) => step.inner === inner);
      this.waiting = this.waiting.filter((step) => step.inner !== inner);
      for (const step of mine) step.resolve({ done: true, value: undefined });
      this.check();
    };
    const gated: TokenIterator = {
      next: (value?: unknown) => {
        if (closed) return inner.next(value);
        return new Promise<IteratorResult<unknown>>((resolve, reject) => {
          this.waiting.push({
            value,
            inner,
            sequenceId,
            resolve: (r) => {
              if (r.done) close();
              resolve(r);
            },
            reject: (err) => {
              close();
              reject(err);
            },
          });
          if (this.joining || this.open === 1) this.release();
          else this.check();
        });
      },
      return: (value?: unknown) => {
        close();
        return inner.return(value);
      },
      throw: (err?: unknown) => {
        close();
        return inner.throw(err);
      },
      [Symbol.asyncIterator]() {
        return gated;
      },
    };
    return gated;
  }

  /** Releases the waiting requests when the step is complete: nothing in flight, and everyone asked. */
  private check(): void {
    if (this.inFlight > 0 || this.waiting.length === 0) return;
    if (this.waiting.length >= this.open) return this.release();
    // Someone is busy with something else: give it this event-loop turn, then go without it.
    this.fallback ??= setImmediate(() => {
      this.fallback = null;
      if (this.inFlight === 0 && this.waiting.length > 0) this.release();
    });
  }

  private release(): void {
    // In sequence order: with one KV stream per sequence, llama.cpp computes a batch in one pass only over runs of
    // consecutive sequence ids in batch order (llama_batch_allocr::split_equal); node-llama-cpp keeps the order
    // in which the sequences asked, and each asks after the same number of steps from here.
    const steps = this.waiting.sort((a, b) => a.sequenceId - b.sequenceId);
    this.waiting = [];
    this.requests += steps.length;
    if (!this.joining) {
      this.steps++;
      this.joining = true;
      setImmediate(() => (this.joining = false));
    }
    for (const step of steps) {
      this.inFlight++;
      step.inner.next(step.value).then(
        (r) => {
          this.inFlight--;
          step.resolve(r);
          this.check();
        },
        (err: unknown) => {
          this.inFlight--;
          step.reject(err);
          this.check();
        },
      );
    }
  }
}
