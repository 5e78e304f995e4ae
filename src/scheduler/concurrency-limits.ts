import { Redis } from "ioredis";
import { AppError } from "../errors/app-error.ts";

/** Who holds a concurrency slot: the key, its account, and the plan's two limits (null = unlimited). */
export interface ConcurrencyHolder {
  keyId: string;
  accountId: string;
  plan: { name: string; maxConcurrent: number | null; maxConcurrentPerAccount: number | null };
}

/**
 * The plans' `maxConcurrent` (per key) and `maxConcurrentPerAccount`: requests running plus queued, over every
 * model. Over either limit, 429 rate_limit_exceeded: it is the key's or plan's limit (§7), not the model's capacity.
 * In memory on one node (`LocalConcurrency`), or shared by the replicas in Redis (`RedisConcurrency`).
 */
export interface ConcurrencyLimits {
  /** Counts one request in; resolves with its release (call exactly once when it ends). Throws 429 over a limit. */
  acquire(holder: ConcurrencyHolder): Promise<() => void>;
  close?(): Promise<void>;
}

const unlimited = (h: ConcurrencyHolder) => h.plan.maxConcurrent === null && h.plan.maxConcurrentPerAccount === null;

function refusal(which: "key" | "account", count: number, retryAfterMs: number): AppError {
  const message =
    which === "key"
      ? `The key has ${count} requests running or queued, its plan's maxConcurrent.`
      : `The account has ${count} requests running or queued, its plan's maxConcurrentPerAccount.`;
  return new AppError("rate_limit_exceeded", { message, retryAfterMs });
}

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

/** The counts of one node, in memory. */
export class LocalConcurrency implements ConcurrencyLimits {
  private readonly byKey = new Map<string, number>();
  private readonly byAccount = new Map<string, number>();
  private readonly hold = new HoldTimer();

  async acquire(holder: ConcurrencyHolder): Promise<() => void> {
    return this.acquireNow(holder);
  }

  acquireNow(holder: ConcurrencyHolder): () => void {
    if (unlimited(holder)) return () => {};
    const { maxConcurrent, maxConcurrentPerAccount } = holder.plan;
    const key = this.byKey.get(holder.keyId) ?? 0;
    const account = this.byAccount.get(holder.accountId) ?? 0;
    if (maxConcurrent !== null && key >= maxConcurrent) throw refusal("key", key, this.hold.retryAfterMs);
    if (maxConcurrentPerAccount !== null && account >= maxConcurrentPerAccount) throw refusal("account", account, this.hold.retryAfterMs);
    this.byKey.set(holder.keyId, key + 1);
    this.byAccount.set(holder.accountId, account + 1);
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
}

function decrement(map: Map<string, number>, id: string): void {
  const n = (map.get(id) ?? 1) - 1;
  if (n <= 0) map.delete(id);
  else map.set(id, n);
}

/**
 * Counts in sorted sets (one per key, one per account) whose members are the requests, scored by when their lease
 * expires (Redis's clock). KEYS: key set, account set; ARGV: key limit, account limit (-1: unlimited), member, TTL.
 * Expired members are dropped first; over a limit the answer is 1 (key) or 2 (account) and the count, else 0.
 */
const acquireScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[4])
for i = 1, 2 do
  if tonumber(ARGV[i]) >= 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
    local count = redis.call('ZCARD', KEYS[i])
    if count >= tonumber(ARGV[i]) then return {i, count} end
  end
end
for i = 1, 2 do
  if tonumber(ARGV[i]) >= 0 then
    redis.call('ZADD', KEYS[i], now + ttl, ARGV[3])
    redis.call('PEXPIRE', KEYS[i], ttl)
  end
end
return {0, 0}
`;

/** Extends a held lease (only if it is still there). KEYS: the sets; ARGV: member, TTL. */
const renewScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 1, #KEYS do
  if redis.call('ZSCORE', KEYS[i], ARGV[1]) then
    redis.call('ZADD', KEYS[i], 'XX', now + tonumber(ARGV[2]), ARGV[1])
    redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[2]))
  end
end
return 1
`;

type AcquireCommand = (...args: (string | number)[]) => Promise<[number, number]>;
type RenewCommand = (...args: (string | number)[]) => Promise<number>;

/**
 * The counts shared by every replica, in Redis: exact across nodes (one atomic script), and a node that dies frees
 * its requests' places when their leases expire (`leaseMs`, 30 s; a live node renews them every third of that).
 * While Redis is unreachable: `open` counts on this node alone (LocalConcurrency), `closed` refuses with 503.
 */
export class RedisConcurrency implements ConcurrencyLimits {
  private readonly local = new LocalConcurrency();
  private readonly hold = new HoldTimer();
  private seq = 0;
  private readonly node = Math.random().toString(36).slice(2);

  private constructor(
    private readonly redis: Redis,
    private readonly onError: "open" | "closed",
    private readonly onStoreError: () => void,
    private readonly leaseMs: number,
  ) {}

  static async connect(url: string, options: { onError?: "open" | "closed"; onStoreError?: () => void; leaseMs?: number } = {}): Promise<RedisConcurrency> {
    const redis = new Redis(url, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: 250, connectTimeout: 1000, enableReadyCheck: false, retryStrategy: (attempt) => Math.min(50 * attempt, 250) });
    redis.on("error", () => {
      // A failed command falls back (onError); ioredis reconnects on its own.
    });
    redis.defineCommand("mgConcAcquire", { numberOfKeys: 2, lua: acquireScript });
    redis.defineCommand("mgConcRenew", { lua: renewScript });
    await redis.connect();
    return new RedisConcurrency(redis, options.onError ?? "open", options.onStoreError ?? (() => {}), options.leaseMs ?? 30_000);
  }

  async acquire(holder: ConcurrencyHolder): Promise<() => void> {
    if (unlimited(holder)) return () => {};
    const sets = [`modelgate:conc:key:${holder.keyId}`, `modelgate:conc:acct:${holder.accountId}`];
    const member = `${this.node}:${++this.seq}`;
    let answer: [number, number];
    try {
      const command = (this.redis as unknown as { mgConcAcquire: AcquireCommand }).mgConcAcquire;
      answer = await command.call(this.redis, ...sets, holder.plan.maxConcurrent ?? -1, holder.plan.maxConcurrentPerAccount ?? -1, member, this.leaseMs);
    } catch {
      this.onStoreError();
      if (this.onError === "closed") throw new AppError("overloaded", { message: "The shared concurrency limits are unavailable.", retryAfterMs: 1000 });
      return this.local.acquireNow(holder);
    }
    const [over, count] = answer.map(Number);
    if (over === 1) throw refusal("key", count, this.hold.retryAfterMs);
    if (over === 2) throw refusal("account", count, this.hold.retryAfterMs);
    const ended = this.hold.started();
    const renew = (this.redis as unknown as { mgConcRenew: RenewCommand }).mgConcRenew;
    const renewal = setInterval(() => void renew.call(this.redis, 2, ...sets, member, this.leaseMs).catch(() => {}), Math.floor(this.leaseMs / 3));
    renewal.unref();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      ended();
      clearInterval(renewal);
      // If this fails, the lease expires on its own.
      void this.redis.multi().zrem(sets[0], member).zrem(sets[1], member).exec().catch(() => {});
    };
  }

  /** Stops without releasing (the leases expire): what a node that dies does. */
  async close(): Promise<void> {
    this.redis.disconnect();
  }
}
