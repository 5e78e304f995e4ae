import type { Lease } from "./runner-types.ts";
import type { Ticket } from "./slot-lease.ts";
import type { QueueEntry, VtcQueue } from "./vtc-queue.ts";

/** A request waiting in a model's queue: the slots it wants, and how the runner hands it a lease or a refusal. */
export interface Waiter {
  wanted: number;
  weight: number;
  resolve(lease: Lease): void;
  reject(err: unknown): void;
}

/**
 * Queues a request for `wanted` slots. It settles with the lease the runner grants it, with the refusal the runner
 * gives it (pushed out), with the signal's reason when it aborts while waiting, or with `timedOut()` after
 * `maxWaitMs`; in the last two cases it leaves the queue.
 */
export function waitInQueue(queue: VtcQueue<Waiter>, ticket: Ticket, wanted: number, signal: AbortSignal, maxWaitMs: number, timedOut: () => unknown): Promise<Lease> {
  return new Promise<Lease>((resolve, reject) => {
    const settle = () => {
      signal.removeEventListener("abort", onAbort);
      clearTimeout(timer);
    };
    const waiter: Waiter = {
      wanted,
      weight: ticket.weight,
      resolve: (lease) => {
        settle();
        resolve(lease);
      },
      reject: (err) => {
        settle();
        reject(err);
      },
    };
    const onAbort = () => {
      if (queue.remove(entry)) waiter.reject(signal.reason);
    };
    const timer = setTimeout(() => {
      if (queue.remove(entry)) waiter.reject(timedOut());
    }, maxWaitMs);
    signal.addEventListener("abort", onAbort, { once: true });
    const entry: QueueEntry<Waiter> = queue.push(ticket.account, ticket.weight, ticket.priority, waiter);
  });
}
