import type { FastifyBaseLogger } from "fastify";
import { MemoryStore } from "./memory-store.ts";
import { SharedStoreCircuit } from "./shared-store-circuit.ts";
import type { BucketHit, HitResult, RateLimitStore } from "./store.ts";

/**
 * The shared (Redis) limiter behind the outage policy of shared-store-circuit.ts: two failures in a row open the
 * circuit; while it is open, requests are counted by a local fallback limiter with `onError: open` (so the
 * rate-limit headers keep coming, per replica), or get 503 overloaded with `onError: closed`. A probe that times out
 * replaces the connection, which a partition can leave open but dead.
 */
export class ResilientStore implements RateLimitStore {
  private readonly circuit: SharedStoreCircuit;
  private readonly fallback = new MemoryStore();

  constructor(
    private readonly shared: RateLimitStore,
    onError: "open" | "closed",
    log: FastifyBaseLogger,
  ) {
    this.circuit = new SharedStoreCircuit({
      ping: () => shared.ping!(),
      onError,
      failuresToOpen: 2,
      log,
      messages: {
        down: onError === "open" ? "redis unreachable: rate limits are counted per replica until it returns" : "redis unreachable: refusing requests (redis.onError: closed) until it returns",
        up: "redis reachable again: rate limits are shared again",
      },
    });
  }

  /** Whether the shared limiter is in use (false while the circuit is open). */
  get healthy(): boolean {
    return this.circuit.healthy;
  }

  hit(bucket: string, limit: number, windowMs: number): Promise<HitResult> {
    return this.circuit.guarded(() => this.shared.hit(bucket, limit, windowMs), () => this.fallback.hitSync(bucket, limit, windowMs));
  }

  hitAll(hits: BucketHit[]): Promise<HitResult[]> {
    return this.circuit.guarded(() => this.shared.hitAll(hits), () => this.fallback.hitAllSync(hits));
  }

  /** Best effort: a refund Redis cannot take now is not worth failing the request for. */
  release(bucket: string, windowMs: number): Promise<void> {
    return this.circuit.bestEffort(() => this.shared.release(bucket, windowMs), () => this.fallback.releaseSync(bucket));
  }

  peek(bucket: string, limit: number, windowMs: number): Promise<HitResult> {
    return this.circuit.guarded(() => this.shared.peek(bucket, limit, windowMs), () => this.fallback.peek(bucket, limit, windowMs));
  }

  /** Calls `listener` on each failed call to the shared store (metrics). */
  onFailure(listener: () => void): void {
    this.circuit.onFailure(listener);
  }

  async close(): Promise<void> {
    this.circuit.close();
    await Promise.all([this.shared.close(), this.fallback.close()]);
  }
}
