import type { LlamaContextSequence } from "node-llama-cpp";
import type { ShareStanding } from "../engine.ts";

type TokenIterator = AsyncGenerator<unknown, unknown, unknown>;
type Step = { value: unknown; inner: TokenIterator; sequenceId: number; resolve: (r: IteratorResult<unknown>) => void; reject: (e: unknown) => void };

/**
 * Makes every decode of a context carry the next token of every sequence that is generating, in one llama.cpp pass,
 * as llama-server's loop does. Without it, node-llama-cpp decodes whatever sequences have queued a token when its
 * dispatcher looks; each sequence samples in its own native job and queues its next token as soon as its own
 * sample is back, so the last one back always missed the decode (4 sequences: every decode carried 3 tokens). And
 * with one KV stream per sequence, llama.cpp computes a batch in one pass only over runs of consecutive, increasing
 * sequence ids in batch order (llama_batch_allocr::split_equal), while node-llama-cpp's batch order is the order in
 * which the sequences asked: mostly one pass over the weights per token.
 *
 * The gate holds a sequence's request for its next token until no token of the current step is still on its way
 * and every open generation has asked (or one event-loop turn has passed, so a generation busy with something
 * else holds no one back); then it passes the requests on together, in sequence-id order, on the next turn
 * (requests arriving before then join them; node-llama-cpp queues them in that order and dispatches after).
 * A single open generation goes straight through.
 *
 * Fair share: each sequence carries the standing of the generation using it (`assign`). While a favoured generation
 * (its account within its share, see ShareStanding) is open, the steps of those over their share are held: the
 * under-served request decodes alone, at its own speed, instead of in a batch whose every step costs more. They go
 * on when it ends or stops being favoured, or after `maxHoldMs` without a step from it (a generation stalled
 * elsewhere holds no one back for long).
 */
/**
 * The longest held steps wait while the favoured generations ask for nothing: a generation between its admission
 * and its first step, or after its last, asks for nothing for milliseconds, and steps held through that are lost
 * to everyone (25 ms cost the flood about a tenth of its throughput in the tenants bench; 2 ms, nothing measurable).
 */
const maxHoldMs = 2;

export class Lockstep {
  /** Open token iterators (generations in progress), with their sequence ids. */
  private readonly open = new Map<TokenIterator, number>();
  /** The standing of the generation using each sequence (none: it counts as within its share). */
  private readonly standings = new Map<number, ShareStanding>();
  private holdTimer: NodeJS.Timeout | null = null;
  /** Requests passed on to node-llama-cpp and not answered yet (their tokens are being decoded or sampled). */
  private inFlight = 0;
  /** Requests holding for the current step to complete. */
  private waiting: Step[] = [];
  /** Requests released, to be passed on together at the next turn; non-null while that turn is pending. */
  private releasing: Step[] | null = null;
  private fallback: NodeJS.Immediate | null = null;
  /** Steps passed on, and the requests in them (their ratio is the tokens per decode). */
  private steps = 0;
  private requests = 0;

  /** Open generations (zero once every request has ended, aborted or not), steps and requests passed on. */
  get stats(): { generations: number; steps: number; tokens: number } {
    return { generations: this.open.size, steps: this.steps, tokens: this.requests };
  }

  /**
   * node-llama-cpp's `batching.dispatchSchedule`: when the tokens queued for a decode go to llama.cpp. Its default
   * waits for the next event-loop turn (setImmediate) unless every sequence of the context has queued one, so a
   * lone generation's next decode waited for all the main thread's other work of its turn (the previous token's
   * chunk, the SSE write, the bookkeeping), where llama-server decodes at once. A lone step (one generation open, its
   * one request passed on) decodes at once; any other waits the turn, so that every request of a step is queued
   * before the decode goes.
   */
  schedule(dispatch: () => void): void {
    if (this.open.size === 1 && this.inFlight === 1) dispatch();
    else setImmediate(dispatch);
  }

  /** The generation now using the sequence stands so in its model's fair share; null when it ends. */
  assign(sequenceId: number, standing: ShareStanding | null): void {
    if (standing) this.standings.set(sequenceId, standing);
    else this.standings.delete(sequenceId);
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
    this.open.set(inner, sequenceId);
    const close = () => {
      if (closed) return;
      closed = true;
      this.open.delete(inner);
      // A request still held for this iterator ends with it.
      for (const step of this.waiting.filter((s) => s.inner === inner)) step.resolve({ done: true, value: undefined });
      this.waiting = this.waiting.filter((s) => s.inner !== inner);
      this.check();
    };
    const gated: TokenIterator = {
      next: (value?: unknown) => {
        if (closed) return inner.next(value);
        return new Promise<IteratorResult<unknown>>((resolve, reject) => {
          const step: Step = {
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
          };
          if (this.releasing && !this.heldNow()(sequenceId)) this.releasing.push(step);
          else if (this.open.size === 1 && this.inFlight === 0) this.passOn([step]);
          else {
            this.waiting.push(step);
            this.check();
          }
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

  /**
   * Which sequences' steps wait now: those over their share while a favoured generation is open. The standings are
   * read once per call (each asks the scheduler), not once per sequence pair.
   */
  private heldNow(): (sequenceId: number) => boolean {
    let holding = false;
    for (const id of this.open.values()) if (this.standings.get(id)?.favoured === true) holding = true;
    return (sequenceId) => holding && this.standings.get(sequenceId)?.overShare === true;
  }

  /**
   * Releases the waiting requests when the step is complete: nothing in flight or releasing, and every open
   * generation that is not held has asked. Held requests stay.
   */
  private check(): void {
    if (this.inFlight > 0 || this.releasing || this.waiting.length === 0) return;
    const held = this.heldNow();
    const ready = this.waiting.filter((s) => !held(s.sequenceId));
    if (ready.length === 0) return this.holdAtMost(maxHoldMs);
    let expected = 0;
    for (const id of this.open.values()) if (!held(id)) expected++;
    if (ready.length >= expected) return this.release(ready);
    // Someone is busy with something else: give it this event-loop turn, then go without it.
    this.fallback ??= setImmediate(() => {
      this.fallback = null;
      if (this.inFlight > 0 || this.releasing) return;
      const stillHeld = this.heldNow();
      const now = this.waiting.filter((s) => !stillHeld(s.sequenceId));
      if (now.length > 0) this.passOn(this.take(now));
    });
  }

  /** Held requests go on when the generations they wait for have asked for nothing within `ms`. */
  private holdAtMost(ms: number): void {
    this.holdTimer ??= setTimeout(() => {
      this.holdTimer = null;
      if (this.inFlight === 0 && !this.releasing && this.waiting.length > 0) this.passOn(this.waiting.splice(0));
    }, ms);
  }

  private take(steps: Step[]): Step[] {
    this.waiting = this.waiting.filter((s) => !steps.includes(s));
    return steps;
  }

  private release(steps: Step[]): void {
    this.releasing = this.take(steps);
    setImmediate(() => {
      this.releasing = null;
      // A favoured generation that opened during the turn holds the steps over their share from now on: its first
      // step (the prompt) decodes alone instead of with theirs.
      const held = this.heldNow();
      const going = steps.filter((s) => !held(s.sequenceId));
      if (going.length < steps.length) this.waiting.push(...steps.filter((s) => held(s.sequenceId)));
      if (going.length > 0) this.passOn(going);
      else this.check();
    });
  }

  private passOn(steps: Step[]): void {
    if (this.holdTimer) clearTimeout(this.holdTimer);
    this.holdTimer = null;
    // In sequence order: node-llama-cpp queues them in the order asked (each takes the same path from here).
    steps.sort((a, b) => a.sequenceId - b.sequenceId);
    this.steps++;
    this.requests += steps.length;
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
