import type { FastifyBaseLogger } from "fastify";
import { SharedStoreCircuit } from "./shared-store-circuit.ts";
import { MemoryTokenStore, type AmountHit, type AmountResult, type AmountSettle, type ReserveOutcome, type TokenStore } from "./token-store.ts";

/**
 * The shared token counters behind the request limiter's outage policy (shared-store-circuit.ts): while the circuit
 * is open, `redis.onError: open` counts in a local fallback per replica, which starts each token window at what
 * Redis last said of it (so a blip in a full window admits what was left, not a fresh window) and seeds quota and
 * budget periods again from the usage table; `closed` answers 503 overloaded.
 */
export class ResilientTokenStore implements TokenStore {
  private readonly circuit: SharedStoreCircuit;
  private readonly fallback = new MemoryTokenStore();

  constructor(
    private readonly shared: TokenStore,
    onError: "open" | "closed",
    log: FastifyBaseLogger,
  ) {
    this.circuit = new SharedStoreCircuit({
      ping: () => shared.ping!(),
      onError,
      // Five failures in a row, not the request limiter's two: a circuit opened by a saturated node (not an outage)
      // counts tokens per replica meanwhile, which over-admits across replicas.
      failuresToOpen: 5,
      log,
      messages: {
        down: onError === "open" ? "redis unreachable: token limits, quotas and budgets are counted per replica until it returns" : "redis unreachable: refusing metered requests (redis.onError: closed) until it returns",
        up: "redis reachable again: token limits are shared again",
      },
    });
  }

  get healthy(): boolean {
    return this.circuit.healthy;
  }

  onFailure(listener: () => void): void {
    this.circuit.onFailure(listener);
  }

  /** What Redis last said of each rolling window (used, when it ends), for the fallback to start from. */
  private readonly known = new Map<string, { used: number; resetAt: number }>();

  reserve(hits: AmountHit[]): Promise<ReserveOutcome> {
    return this.circuit.guarded(
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
  settle(settles: AmountSettle[]): Promise<void> {
    return this.circuit.bestEffort(() => this.shared.settle(settles), () => this.fallback.settleSync(settles));
  }

  peek(hits: AmountHit[]): Promise<AmountResult[]> {
    return this.circuit.guarded(
      async () => {
        const results = await this.shared.peek(hits);
        this.remember(hits, results);
        return results;
      },
      () => this.fallback.peekSync(hits),
    );
  }

  async seed(bucket: string, value: number, expireAt: number): Promise<void> {
    return this.circuit.guarded(() => this.shared.seed(bucket, value, expireAt), () => this.fallback.seedSync(bucket, value, expireAt));
  }

  async close(): Promise<void> {
    this.circuit.close();
    await Promise.all([this.shared.close(), this.fallback.close()]);
  }
}
