import type { ConcurrencyHolder, ConcurrencyLimits } from "../app-context.ts";
import { AppError } from "../errors/app-error.ts";

/** Requests of a key and of its account. */
export interface HeldCounts {
  key: number;
  account: number;
}

export const unlimited = (h: ConcurrencyHolder) => h.plan.maxConcurrent === null && h.plan.maxConcurrentPerAccount === null;

/** Moving average of how long a request holds its place, for Retry-After (at least 1 s). */
class HoldTimer {
  private avgMs = 1000;
  started(): () => void {
    const at = performance.now();
    return () => (this.avgMs = this.avgMs * 0.8 + (performance.now() - at) * 0.2);
  }
  get retryAfterMs(): number {
    return Math.max(1000, Math.ceil(this.avgMs));
  }
}

/**
 * The plans' `maxConcurrent` and `maxConcurrentPerAccount` counted on one node, in memory. With Redis
 * (rate-limit/redis-concurrency.ts) it also keeps this node's share of the shared counts, which its fallback starts
 * from while Redis is away.
 */
export class LocalConcurrency implements ConcurrencyLimits {
  private readonly byKey = new Map<string, number>();
  private readonly byAccount = new Map<string, number>();
  private readonly hold = new HoldTimer();

  acquire(holder: ConcurrencyHolder): () => void {
    return this.acquireNow(holder);
  }

  /**
   * Counts one request in when it fits both limits with `elsewhere` (requests other nodes hold) counted too; throws
   * 429 over either.
   */
  acquireNow(holder: ConcurrencyHolder, elsewhere: HeldCounts = { key: 0, account: 0 }): () => void {
    if (unlimited(holder)) return () => {};
    const { maxConcurrent, maxConcurrentPerAccount } = holder.plan;
    const { key, account } = this.held(holder);
    if (maxConcurrent !== null && key + elsewhere.key >= maxConcurrent) throw this.refusal("key", key + elsewhere.key);
    if (maxConcurrentPerAccount !== null && account + elsewhere.account >= maxConcurrentPerAccount) throw this.refusal("account", account + elsewhere.account);
    return this.admitted(holder);
  }

  /** Counts in a request admitted elsewhere (by the shared counts), without checking. */
  admitted(holder: ConcurrencyHolder): () => void {
    increment(this.byKey, holder.keyId);
    increment(this.byAccount, holder.accountId);
    const ended = this.hold.started();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      ended();
      decrement(this.byKey, holder.keyId);
      decrement(this.byAccount, holder.accountId);
    };
  }

  /** This node's requests of the holder's key and account. */
  held(holder: ConcurrencyHolder): HeldCounts {
    return { key: this.byKey.get(holder.keyId) ?? 0, account: this.byAccount.get(holder.accountId) ?? 0 };
  }

  /** 429 rate_limit_exceeded: the key's or plan's limit (§7), not the model's capacity. */
  refusal(which: "key" | "account", count: number): AppError {
    const message =
      which === "key"
        ? `The key has ${count} requests running or queued, its plan's maxConcurrent.`
        : `The account has ${count} requests running or queued, its plan's maxConcurrentPerAccount.`;
    return new AppError("rate_limit_exceeded", { message, retryAfterMs: this.hold.retryAfterMs });
  }
}

function increment(map: Map<string, number>, id: string): void {
  map.set(id, (map.get(id) ?? 0) + 1);
}

function decrement(map: Map<string, number>, id: string): void {
  const n = (map.get(id) ?? 1) - 1;
  if (n <= 0) map.delete(id);
  else map.set(id, n);
}
