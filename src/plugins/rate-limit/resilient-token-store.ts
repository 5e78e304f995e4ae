import { circuitBreaker, CircuitState, ConsecutiveBreaker, handleAll, type CircuitBreakerPolicy } from "cockatiel";
import type { FastifyBaseLogger } from "fastify";
import { AppError } from "../../errors/app-error.ts";
import { MemoryTokenStore, type AmountHit, type AmountResult, type AmountSettle, type ReserveOutcome, type TokenStore } from "./token-store.ts";

const probeEveryMs = 100;

/**
 * The shared token counters behind the request limiter's outage policy (resilient-store.ts): two failures in a
 * row open the circuit; while it is open, `redis.onError: open` counts in a local fallback per replica (seeded
 * periods are seeded again from the usage table there), `closed` answers 503 overloaded. A background PING probes.
 */
export class ResilientTokenStore implements TokenStore {
  private readonly breaker: CircuitBreakerPolicy;
  private readonly fallback = new MemoryTokenStore();
  private prober: NodeJS.Timeout | null = null;

  constructor(
    private readonly shared: TokenStore,
    private readonly onError: "open" | "closed",
    log: FastifyBaseLogger,
  ) {
    this.breaker = circuitBreaker(handleAll, { halfOpenAfter: probeEveryMs, breaker: new ConsecutiveBreaker(2) });
    let down = false;
    this.breaker.onBreak(() => {
      this.startProbing();
      if (down) return;
      down = true;
      log.warn(onError === "open" ? "redis unreachable: token limits, quotas and budgets are counted per replica until it returns" : "redis unreachable: refusing metered requests (redis.onError: closed) until it returns");
    });
    this.breaker.onReset(() => {
      this.stopProbing();
      down = false;
      log.info("redis reachable again: token limits are shared again");
    });
  }

  get healthy(): boolean {
    return this.breaker.state === CircuitState.Closed;
  }

  onFailure(listener: () => void): void {
    this.breaker.onFailure(() => listener());
  }

  reserve(hits: AmountHit[]): Promise<ReserveOutcome> {
    return this.guarded(() => this.shared.reserve(hits), () => this.fallback.reserveSync(hits));
  }

  /** Best effort, like the request limiter's release: a settle Redis cannot take now does not fail the request. */
  async settle(settles: AmountSettle[]): Promise<void> {
    if (this.breaker.state !== CircuitState.Closed) return this.fallback.settleSync(settles);
    await this.breaker.execute(() => this.shared.settle(settles)).catch(() => {});
  }

  peek(hits: AmountHit[]): Promise<AmountResult[]> {
    return this.guarded(() => this.shared.peek(hits), () => this.fallback.peekSync(hits));
  }

  async seed(bucket: string, value: number, expireAt: number): Promise<void> {
    return this.guarded(() => this.shared.seed(bucket, value, expireAt), () => this.fallback.seedSync(bucket, value, expireAt));
  }

  private async guarded<T>(shared: () => Promise<T>, local: () => T): Promise<T> {
    try {
      if (this.breaker.state !== CircuitState.Closed) throw new Error("the circuit is open");
      return await this.breaker.execute(shared);
    } catch {
      if (this.onError === "closed") throw new AppError("overloaded", { message: "The rate limiter is unavailable; retry shortly.", retryAfterMs: 1000 });
      return local();
    }
  }

  private startProbing(): void {
    if (this.prober) return;
    this.prober = setInterval(() => void this.breaker.execute(() => this.shared.ping!()).catch(() => {}), probeEveryMs);
    this.prober.unref();
  }

  private stopProbing(): void {
    if (this.prober) clearInterval(this.prober);
    this.prober = null;
  }

  async close(): Promise<void> {
    this.stopProbing();
    await Promise.all([this.shared.close(), this.fallback.close()]);
  }
}
