import { circuitBreaker, CircuitState, ConsecutiveBreaker, handleAll, type CircuitBreakerPolicy } from "cockatiel";
import type { FastifyBaseLogger } from "fastify";
import { AppError } from "../../errors/app-error.ts";
import { MemoryStore } from "./memory-store.ts";
import type { BucketHit, HitResult, RateLimitStore } from "./store.ts";

/** While the circuit is open, Redis is probed this often. */
const probeEveryMs = 100;

/**
 * The shared (Redis) limiter behind a circuit breaker. Two failures in a row open the circuit; while it is open,
 * requests do not wait on Redis at all: with `onError: open` they are counted by a local fallback limiter (so the
 * rate-limit headers keep coming, per replica), with `onError: closed` they get 503 overloaded. Requests are never
 * the probes: a background PING every 100 ms does it (one that times out replaces the connection, which a
 * partition can leave open but dead), so shared limits come back within a second of Redis returning. State
 * changes are logged once each.
 */
export class ResilientStore implements RateLimitStore {
  private readonly breaker: CircuitBreakerPolicy;
  private readonly fallback = new MemoryStore();
  private prober: NodeJS.Timeout | null = null;

  constructor(
    private readonly shared: RateLimitStore,
    private readonly onError: "open" | "closed",
    log: FastifyBaseLogger,
  ) {
    this.breaker = circuitBreaker(handleAll, { halfOpenAfter: probeEveryMs, breaker: new ConsecutiveBreaker(2) });
    // A failed probe breaks the circuit again: only the first break of an outage is logged.
    let down = false;
    this.breaker.onBreak(() => {
      this.startProbing();
      if (down) return;
      down = true;
      log.warn(onError === "open" ? "redis unreachable: rate limits are counted per replica until it returns" : "redis unreachable: refusing requests (redis.onError: closed) until it returns");
    });
    this.breaker.onReset(() => {
      this.stopProbing();
      down = false;
      log.info("redis reachable again: rate limits are shared again");
    });
  }

  /** Whether the shared limiter is in use (false while the circuit is open). */
  get healthy(): boolean {
    return this.breaker.state === 0;
  }

  hit(bucket: string, limit: number, windowMs: number): Promise<HitResult> {
    return this.guarded(() => this.shared.hit(bucket, limit, windowMs), () => this.fallback.hitSync(bucket, limit, windowMs));
  }

  hitAll(hits: BucketHit[]): Promise<HitResult[]> {
    return this.guarded(() => this.shared.hitAll(hits), () => this.fallback.hitAllSync(hits));
  }

  /** Best effort: a refund Redis cannot take now is not worth failing the request for. */
  async release(bucket: string, windowMs: number): Promise<void> {
    if (this.breaker.state !== CircuitState.Closed) return this.fallback.releaseSync(bucket);
    await this.breaker.execute(() => this.shared.release(bucket, windowMs)).catch(() => {});
  }

  peek(bucket: string, limit: number, windowMs: number): Promise<HitResult> {
    return this.guarded(() => this.shared.peek(bucket, limit, windowMs), () => this.fallback.peek(bucket, limit, windowMs));
  }

  /** Calls `listener` on each failed call to the shared store (metrics). */
  onFailure(listener: () => void): void {
    this.breaker.onFailure(() => listener());
  }

  private async guarded<T>(shared: () => Promise<T>, local: () => T | Promise<T>): Promise<T> {
    try {
      if (this.breaker.state !== CircuitState.Closed) throw new Error("the circuit is open");
      return await this.breaker.execute(shared);
    } catch {
      if (this.onError === "closed") {
        throw new AppError("overloaded", { message: "The rate limiter is unavailable; retry shortly.", retryAfterMs: 1000 });
      }
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
