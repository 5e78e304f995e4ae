import type { ConcurrencyHolder, ConcurrencyLimits } from "../../app-context.ts";
import { LocalConcurrency, unlimited, type HeldCounts } from "../concurrency-limits.ts";
import { LastSeen, type SharedRedis } from "./shared-redis.ts";

/**
 * Counts in sorted sets (one per key, one per account) whose members are the requests, scored by when their lease
 * expires (Redis's clock). KEYS: key set, account set; ARGV: key limit, account limit (-1: unlimited), member, TTL.
 * Expired members are dropped first. Answers {over, key count, account count}: over is 1 (key) or 2 (account) when
 * a limit is reached, else 0 and the request is counted in (the counts include it).
 */
const acquireScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[4])
local counts = {0, 0}
for i = 1, 2 do
  if tonumber(ARGV[i]) >= 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
    counts[i] = redis.call('ZCARD', KEYS[i])
  end
end
for i = 1, 2 do
  if tonumber(ARGV[i]) >= 0 and counts[i] >= tonumber(ARGV[i]) then return {i, counts[1], counts[2]} end
end
for i = 1, 2 do
  if tonumber(ARGV[i]) >= 0 then
    redis.call('ZADD', KEYS[i], now + ttl, ARGV[3])
    redis.call('PEXPIRE', KEYS[i], ttl)
    counts[i] = counts[i] + 1
  end
end
return {0, counts[1], counts[2]}
`;

/**
 * Extends a held lease, or puts it back: one an outage let expire, or one admitted by a fallback while Redis was
 * away, so that the shared counts hold every running request again. KEYS: the sets; ARGV: member, TTL.
 */
const renewScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], now + tonumber(ARGV[2]), ARGV[1])
  redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[2]))
end
return 1
`;

/**
 * The concurrency limits shared by every replica, in Redis: exact across nodes (one atomic script), and a node that
 * dies frees its requests' places when their leases expire (`leaseMs`, 30 s; a live node renews them every third of
 * that). Under the outage policy of shared-redis.ts: while the circuit is open, `redis.onError: open` counts on
 * this node, starting where Redis left off: this node's own requests, and the other nodes' as Redis last reported
 * them, each counted until its lease would have expired; `closed` refuses with 503.
 */
export class RedisConcurrency implements ConcurrencyLimits {
  /** This node's requests, however they were admitted: what the fallback starts from. */
  private readonly local = new LocalConcurrency();
  /** Per set, the other nodes' requests when Redis last answered, until their leases would have expired. */
  private readonly elsewhere = new LastSeen<{ count: number; until: number }>();
  private seq = 0;
  private readonly node = Math.random().toString(36).slice(2);

  constructor(
    private readonly shared: SharedRedis,
    private readonly leaseMs = 30_000,
  ) {
    shared.defineScripts({ mgConcAcquire: { numberOfKeys: 2, lua: acquireScript }, mgConcRenew: { lua: renewScript } });
  }

  acquire(holder: ConcurrencyHolder): (() => void) | Promise<() => void> {
    return unlimited(holder) ? () => {} : this.acquireShared(holder);
  }

  private async acquireShared(holder: ConcurrencyHolder): Promise<() => void> {
    const sets = [`modelgate:conc:key:${holder.keyId}`, `modelgate:conc:acct:${holder.accountId}`];
    const member = `${this.node}:${++this.seq}`;
    const { maxConcurrent, maxConcurrentPerAccount } = holder.plan;
    // null: Redis is away and this node counts alone (a 429 is thrown out here, never inside: it is not a failure).
    const answer = await this.shared.guarded<number[] | null>(
      () => this.shared.script<number[]>("mgConcAcquire", ...sets, maxConcurrent ?? -1, maxConcurrentPerAccount ?? -1, member, this.leaseMs),
      () => null,
    );
    const release = answer ? this.counted(holder, sets, answer.map(Number)) : this.local.acquireNow(holder, { key: this.seenElsewhere(sets[0]), account: this.seenElsewhere(sets[1]) });
    const limited = sets.filter((_, i) => [maxConcurrent, maxConcurrentPerAccount][i] !== null);
    const renewal = setInterval(() => void this.shared.bestEffort(() => this.shared.script("mgConcRenew", limited.length, ...limited, member, this.leaseMs), () => {}), Math.floor(this.leaseMs / 3));
    renewal.unref();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      clearInterval(renewal);
      release();
      // Tried even while the circuit is open, unawaited; if it fails, the lease expires on its own.
      void this.shared.transaction((multi) => multi.zrem(sets[0], member).zrem(sets[1], member)).catch(() => {});
    };
  }

  /** Redis's answer: a 429 over a limit, else this node counts the request too. */
  private counted(holder: ConcurrencyHolder, sets: string[], [over, key, account]: number[]): () => void {
    const mine = this.local.held(holder);
    const admitted = over === 0 ? 1 : 0;
    this.remember(sets, { key: key - mine.key - admitted, account: account - mine.account - admitted });
    if (over === 1) throw this.local.refusal("key", key);
    if (over === 2) throw this.local.refusal("account", account);
    return this.local.admitted(holder);
  }

  private remember(sets: string[], others: HeldCounts): void {
    const until = Date.now() + this.leaseMs;
    this.elsewhere.remember(sets[0], { count: Math.max(0, others.key), until });
    this.elsewhere.remember(sets[1], { count: Math.max(0, others.account), until });
  }

  private seenElsewhere(set: string): number {
    return this.elsewhere.get(set)?.count ?? 0;
  }
}
