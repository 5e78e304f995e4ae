/**
 * While interactive requests have arrived at a model within this long, batch work starts only while it leaves one
 * slot free (with `parallel > 1`), so an interactive request finds a slot instead of waiting for a batch line to end
 * (nothing is preempted). Alone, batch work takes every slot; past `batchMaxWait`, a batch request takes the next
 * free slot, headroom or not (the queue's age bound).
 */
const headroomWindowMs = 10_000;

/** The interactive headroom of one model: how many free slots batch work may take, and when held-back batch work is looked at again. */
export class InteractiveHeadroom {
  /** When the last interactive request arrived (on `now`). */
  private seenAt = -Infinity;
  private wakeTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly parallel: number,
    private readonly now: () => number,
    /** Looks at the queue again (the runner's `next`). */
    private readonly wake: () => void,
  ) {}

  interactiveArrived(): void {
    this.seenAt = this.now();
  }

  /** Of `free` slots, those batch work may take: one fewer while the window is open. */
  batchSlots(free: number): number {
    const held = this.parallel > 1 && this.now() - this.seenAt < headroomWindowMs ? 1 : 0;
    return Math.max(0, free - held);
  }

  /**
   * Batch waiters held back get another look when the window ends without interactive arrivals, or at `dueAt` (when
   * the oldest of them passes its age bound), whichever comes first. An armed wake-up is never later than either:
   * arrivals only move the window's end later, and the oldest waiter's due time moves later only when it leaves.
   */
  wakeBatchLater(dueAt: number | null): void {
    if (this.wakeTimer) return;
    const at = Math.min(this.seenAt + headroomWindowMs, dueAt ?? Infinity);
    this.wakeTimer = setTimeout(() => {
      this.wakeTimer = null;
      this.wake();
    }, Math.max(1, at - this.now()));
    this.wakeTimer.unref();
  }
}
