import { circuitBreaker, CircuitState, ConsecutiveBreaker, handleAll, type CircuitBreakerPolicy } from "cockatiel";
import type { FastifyBaseLogger } from "fastify";
import { AppError } from "../../errors/app-error.ts";
import { MemoryTokenStore, type AmountHit, type AmountResult, type AmountSettle, type ReserveOutcome, type TokenStore } from "./token-store.ts";

const probeEveryMs = 100;

/**
 * The shared token counters behind the request limiter's outage policy (resilient-store.ts): five failures in a
 * row open the circuit; while it is open, `redis.onError: open` counts in a local fallback per replica, which starts
 * each token window at what Redis last said of it (so a blip in a full window admits what was left, not a fresh
 * window) and seeds quota and budget periods again from the usage table; `closed` answers 503 overloaded. A background PING probes.
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
    // Five failures in a row, not the request limiter's two: a circuit opened by a saturated node (not an outage)
    // counts tokens per replica meanwhile, which over-admits across replicas.
    this.breaker = circuitBreaker(handleAll, { halfOpenAfter: probeEveryMs, breaker: new ConsecutiveBreaker(5) });
    let down = false;
    let lastError: unknown = null;
    this.breaker.onFailure((failure) => {
      if ("error" in failure.reason) lastError = failure.reason.error;
    });
    this.breaker.onBreak(() => {
      this.startProbing();
      if (down) return;
      down = true;
      log.warn({ err: lastError }, onError === "open" ? "redis unreachable: token limits, quotas and budgets are counted per replica until it returns" : "redis unreachable: refusing metered requests (redis.onError: closed) until it returns");
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

  /** What Redis last said of each rolling window (used, when it ends), for the fallback to start from. */
  private readonly known = new Map<string, { used: number; resetAt: number }>();

  reserve(hits: AmountHit[]): Promise<ReserveOutcome> {
    return this.guarded(
      async () => {
        const outcome = await this.shared.reserve(hits);
        if (!outcome.missing) this.remember(hits, outcome.results);
        return outcome;
      },
      () => {
        for (const h of hits) {
          const seen = h.windowMs !== undefined ? this.known.get(h.bucket) : undefined;
          if (seen) this.fallback.adopt(h.bucket, seen.used, seen.resetAt);
        }
        return this.fallback.reserveSync(hits);
      },
    );
  }

  private remember(hits: AmountHit[], results: AmountResult[]): void {
    const now = Date.now();
    hits.forEach((h, i) => {
      if (h.windowMs === undefined) return;
      this.known.delete(h.bucket);
      this.known.set(h.bucket, { used: results[i].used, resetAt: now + results[i].resetMs });
      if (this.known.size > 100_000) this.known.delete(this.known.keys().next().value!);
    });
  }

  /** Best effort, like the request limiter's release: a settle Redis cannot take now does not fail the request. */
  async settle(settles: AmountSettle[]): Promise<void> {
    if (this.breaker.state !== CircuitState.Closed) return this.fallback.settleSync(settles);
    await this.breaker.execute(() => this.shared.settle(settles)).catch(() => {});
  }

  peek(hits: AmountHit[]): Promise<AmountResult[]> {
    return this.guarded(
      async () => {
        const results = await this.shared.peek(hits);
        this.remember(hits, results);
        return results;
      },
      () => this.fallback.peekSync(hits),
    );
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
