import { circuitBreaker, ConsecutiveBreaker, handleWhen, BrokenCircuitError, type CircuitBreakerPolicy } from "cockatiel";
import type { FastifyBaseLogger } from "fastify";

/** Errors that mean the database cannot be reached (as opposed to a query it refused). */
const unreachableCodes = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "EPIPE", "57P01", "57P03", "08000", "08001", "08003", "08006"]);
const unreachableMessages = /Connection terminated|Query read timeout|Client has encountered a connection error|Connection is closed/i;
/**
 * pg-pool's answer when every connection is in use and none freed up within connectionTimeoutMillis. (A connection
 * that cannot be opened fails otherwise: refused, or "Connection terminated due to connection timeout".)
 */
const poolBusyMessage = /^timeout exceeded when trying to connect$/;

/**
 * The pool had no free connection in time: the database answers, this node is just asking too much of it. Not an
 * outage: it neither opens the circuit nor lets keys be served from what was last seen.
 */
export function isStoreBusy(err: unknown): boolean {
  const message = (err as { message?: unknown } | null)?.message;
  return typeof message === "string" && poolBusyMessage.test(message);
}

export function isStoreUnreachable(err: unknown): boolean {
  if (err instanceof BrokenCircuitError) return true;
  const e = err as { code?: string; message?: string } | null;
  return Boolean(e && ((e.code && unreachableCodes.has(e.code)) || (e.message && unreachableMessages.test(e.message))));
}

/**
 * Whether the database answers, tracked from the operations that go through `run`. Two unreachable errors in a
 * row open a circuit: for the next second operations fail at once instead of waiting on a dead connection (keys
 * are then served from what was last seen valid); then one operation probes again. State changes are logged once.
 *
 * `state` is unreachable from the first operation that could not reach the database until one succeeds, not only
 * while the circuit is open: a node that has just answered a key "cannot be checked" (503) must not call its store
 * ok because that was the only operation since (the circuit waits for a second failure).
 */
export class StoreHealth {
  private readonly breaker: CircuitBreakerPolicy;
  private downSince: number | null = null;

  constructor(log: FastifyBaseLogger) {
    this.breaker = circuitBreaker(handleWhen(isStoreUnreachable), { halfOpenAfter: 1000, breaker: new ConsecutiveBreaker(2) });
    this.breaker.onFailure(({ reason }) => {
      if ("error" in reason && isStoreUnreachable(reason.error)) this.downSince ??= Date.now();
    });
    this.breaker.onSuccess(() => {
      this.downSince = null;
    });
    this.breaker.onBreak(() => log.warn("the database is unreachable: serving keys last seen valid (store.staleIfError), buffering usage"));
    this.breaker.onReset(() => log.info("the database is reachable again"));
  }

  get state(): { state: "ok" | "unreachable"; since: string | null } {
    return this.downSince === null ? { state: "ok", since: null } : { state: "unreachable", since: new Date(this.downSince).toISOString() };
  }

  /** Calls `listener` on each operation that failed because the database could not be reached (metrics). */
  onUnreachable(listener: () => void): void {
    this.breaker.onFailure(({ reason }) => {
      if ("error" in reason && isStoreUnreachable(reason.error)) listener();
    });
  }

  run<T>(operation: () => Promise<T>): Promise<T> {
    return this.breaker.execute(operation);
  }
}
