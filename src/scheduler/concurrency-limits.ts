import { AppError } from "../errors/app-error.ts";

/** Who holds a concurrency slot: the key, its account, and the plan's two limits (null = unlimited). */
export interface ConcurrencyHolder {
  keyId: string;
  accountId: string;
  plan: { name: string; maxConcurrent: number | null; maxConcurrentPerAccount: number | null };
}

/**
 * The plans' `maxConcurrent` (per key) and `maxConcurrentPerAccount`: requests running plus queued, over every
 * model, counted on this node (see docs/configuration.md: with N replicas a key may hold up to N × the limit).
 * Over either limit, 429 rate_limit_exceeded: it is the key's or plan's limit (§7), not the model's capacity.
 */
export class ConcurrencyLimits {
  private readonly byKey = new Map<string, number>();
  private readonly byAccount = new Map<string, number>();
  /** Moving average of how long a request holds its place, for Retry-After. */
  private avgHoldMs = 1000;

  /** Counts one request in; returns the release (call exactly once when it ends). Throws 429 over a limit. */
  acquire(holder: ConcurrencyHolder): () => void {
    const { maxConcurrent, maxConcurrentPerAccount } = holder.plan;
    if (maxConcurrent === null && maxConcurrentPerAccount === null) return () => {};
    const key = this.byKey.get(holder.keyId) ?? 0;
    const account = this.byAccount.get(holder.accountId) ?? 0;
    const retryAfterMs = Math.max(1000, Math.ceil(this.avgHoldMs));
    if (maxConcurrent !== null && key >= maxConcurrent) {
      throw new AppError("rate_limit_exceeded", { message: `The key has ${key} requests running or queued, its plan's maxConcurrent.`, retryAfterMs });
    }
    if (maxConcurrentPerAccount !== null && account >= maxConcurrentPerAccount) {
      throw new AppError("rate_limit_exceeded", { message: `The account has ${account} requests running or queued, its plan's maxConcurrentPerAccount.`, retryAfterMs });
    }
    this.byKey.set(holder.keyId, key + 1);
    this.byAccount.set(holder.accountId, account + 1);
    const started = performance.now();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.avgHoldMs = this.avgHoldMs * 0.8 + (performance.now() - started) * 0.2;
      decrement(this.byKey, holder.keyId);
      decrement(this.byAccount, holder.accountId);
    };
  }
}

function decrement(map: Map<string, number>, id: string): void {
  const n = (map.get(id) ?? 1) - 1;
  if (n <= 0) map.delete(id);
  else map.set(id, n);
}
