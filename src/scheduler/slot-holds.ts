/**
 * Slots left free on purpose, so that a request that is about to come finds one: the interactive headroom (here)
 * and the light-account reserve (vtc-queue.ts); and the wake-up that looks at the queue again when a hold lapses.
 */

/**
 * While interactive requests have arrived at a model within this long, batch work starts only while it leaves one
 * slot free (with `parallel > 1`), so an interactive request finds a slot instead of waiting for a batch line to end
 * (nothing is preempted). Alone, batch work takes every slot; past `batchMaxWait`, a batch request takes the next
 * free slot, headroom or not (the queue's age bound).
 */
const headroomWindowMs = 10_000;

/** The interactive headroom of one model: how many free slots batch work may take. */
export class InteractiveHeadroom {
  /** When the last interactive request arrived (on `now`). */
  private seenAt = -Infinity;

  constructor(
    private readonly parallel: number,
    private readonly now: () => number,
  ) {}

  interactiveArrived(): void {
    this.seenAt = this.now();
  }

  /** Of `free` slots, those batch work may take: one fewer while the window is open. */
  batchSlots(free: number): number {
    const held = this.parallel > 1 && this.now() - this.seenAt < headroomWindowMs ? 1 : 0;
    return Math.max(0, free - held);
  }

  /** When the window closes without another interactive arrival (null when there is no headroom). */
  endsAt(): number | null {
    return this.parallel > 1 ? this.seenAt + headroomWindowMs : null;
  }
}

/** One wake-up of a model's queue, at the earliest time some hold on its free slots lapses. */
export class HoldWake {
  private timer: NodeJS.Timeout | null = null;
  private armedFor = Infinity;

  constructor(
    private readonly now: () => number,
    /** Looks at the queue again (the runner's `next`). */
    private readonly wake: () => void,
  ) {}

  /**
   * Wakes the queue at the earliest of `times` still ahead (a hold that has lapsed holds nothing, and a wake-up
   * armed earlier stands: waking early only looks again).
   */
  atEarliest(times: (number | null)[]): void {
    const now = this.now();
    const at = Math.min(...times.map((t) => (t !== null && t > now ? t : Infinity)));
    if (at === Infinity || (this.timer && this.armedFor <= at)) return;
    if (this.timer) clearTimeout(this.timer);
    this.armedFor = at;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.armedFor = Infinity;
      this.wake();
    }, at - now);
    this.timer.unref();
  }
}
