import { circuitBreaker, CircuitState, ConsecutiveBreaker, handleAll, type CircuitBreakerPolicy } from "cockatiel";
import type { FastifyBaseLogger } from "fastify";
import { AppError } from "../../errors/app-error.ts";

/** While the circuit is open, the shared store is probed this often. */
const probeEveryMs = 100;

export interface SharedStoreCircuitOptions {
  /** A cheap round trip to the shared store (Redis PING); the only call made while the circuit is open. */
  ping: () => Promise<unknown>;
  onError: "open" | "closed";
  /** Failed calls in a row that open the circuit. */
  failuresToOpen: number;
  log: FastifyBaseLogger;
  /** Logged once when an outage starts (with the failure that opened it) and once when it ends. */
  messages: { down: string; up: string };
}

/**
 * The outage policy of a store shared by the replicas (the limiters' Redis), behind a circuit breaker: while it is
 * open, calls do not wait on the shared store at all: with `onError: open` they go to the caller's local fallback,
 * with `onError: closed` they get 503 overloaded. Calls are never the probes: a background ping every 100 ms closes
 * the circuit again, so shared counting comes back within a second of the store returning. State changes are logged
 * once each.
 */
export class SharedStoreCircuit {
  private readonly breaker: CircuitBreakerPolicy;
  private prober: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(private readonly options: SharedStoreCircuitOptions) {
    this.breaker = circuitBreaker(handleAll, { halfOpenAfter: probeEveryMs, breaker: new ConsecutiveBreaker(options.failuresToOpen) });
    // A failed probe breaks the circuit again: only the first break of an outage is logged.
    let down = false;
    let lastError: unknown = null;
    this.breaker.onFailure((failure) => {
      if ("error" in failure.reason) lastError = failure.reason.error;
    });
    this.breaker.onBreak(() => {
      this.startProbing();
      if (down) return;
      down = true;
      options.log.warn({ err: lastError }, options.messages.down);
    });
    this.breaker.onReset(() => {
      this.stopProbing();
      down = false;
      options.log.info(options.messages.up);
    });
  }

  /** Whether the shared store is in use (false while the circuit is open). */
  get healthy(): boolean {
    return this.breaker.state === CircuitState.Closed;
  }

  /** Calls `listener` on each failed call to the shared store (metrics). */
  onFailure(listener: () => void): void {
    this.breaker.onFailure(() => listener());
  }

  /** The shared call while the circuit is closed; on its failure or an open circuit, the policy decides. */
  async guarded<T>(shared: () => Promise<T>, local: () => T | Promise<T>): Promise<T> {
    try {
      if (!this.healthy) throw new Error("the circuit is open");
      return await this.breaker.execute(shared);
    } catch {
      if (this.options.onError === "closed") throw new AppError("overloaded", { message: "The rate limiter is unavailable; retry shortly.", retryAfterMs: 1000 });
      return local();
    }
  }

  /** A call not worth failing a request for (a refund): local while the circuit is open, else shared, errors dropped. */
  async bestEffort(shared: () => Promise<unknown>, local: () => void): Promise<void> {
    if (!this.healthy) return local();
    await this.breaker.execute(shared).catch(() => {});
  }

  private startProbing(): void {
    // A call failing after close (a lease's renewal on a closed connection) does not start probing again.
    if (this.prober || this.closed) return;
    this.prober = setInterval(() => void this.breaker.execute(this.options.ping).catch(() => {}), probeEveryMs);
    this.prober.unref();
  }

  private stopProbing(): void {
    if (this.prober) clearInterval(this.prober);
    this.prober = null;
  }

  close(): void {
    this.closed = true;
    this.stopProbing();
  }
}
