import { MemoryStore } from "./memory-store.ts";
import { LastSeen, type SharedRedis } from "./shared-redis.ts";
import type { BucketHit, HitResult, RateLimitStore } from "./store.ts";

/**
 * Count-unless-full over one or more buckets in one atomic step, so replicas sharing Redis never over-admit: when
 * any bucket is full the request is counted in none (a 429 is not counted); otherwise each is incremented, an
 * expired or new window starting at 1 with the window as its TTL. ARGV holds limit and window per key; the answer
 * is count, ttl and "had room" per key.
 */
const hitScript = `
local counts, ttls, room = {}, {}, {}
local all = 1
for i = 1, #KEYS do
  local limit = tonumber(ARGV[2 * i - 1])
  local ttl = redis.call('PTTL', KEYS[i])
  local count = 0
  if ttl > 0 then count = tonumber(redis.call('GET', KEYS[i]) or '0') end
  counts[i], ttls[i] = count, ttl
  if count >= limit then room[i] = 0; all = 0 else room[i] = 1 end
end
local out = {}
for i = 1, #KEYS do
  local window = tonumber(ARGV[2 * i])
  local count, ttl = counts[i], ttls[i]
  if ttl <= 0 then ttl = window end
  if all == 1 then
    if ttls[i] <= 0 then
      redis.call('SET', KEYS[i], 1, 'PX', window)
      count = 1
    else
      count = redis.call('INCR', KEYS[i])
    end
  end
  out[3 * i - 2], out[3 * i - 1], out[3 * i] = count, ttl, room[i]
end
return out
`;

/** Takes back one counted request while its window is open. */
const releaseScript = `
if redis.call('PTTL', KEYS[1]) > 0 and tonumber(redis.call('GET', KEYS[1]) or '0') > 0 then
  redis.call('DECR', KEYS[1])
end
return 1
`;

const keyOf = (bucket: string, windowMs: number) => `modelgate:rl:${bucket}:${windowMs}`;

/**
 * The request limiter shared by the replicas in Redis, under the outage policy of shared-redis.ts: while the circuit
 * is open it counts in a memory store on this replica (`redis.onError: open`), each window starting at what Redis
 * last said of it, or refuses with 503 (`closed`).
 */
export class RedisStore implements RateLimitStore {
  private readonly fallback = new MemoryStore();
  private readonly seen = new LastSeen<{ count: number; until: number }>();

  constructor(private readonly shared: SharedRedis) {
    shared.defineScripts({ mgRateHitAll: { lua: hitScript }, mgRateRelease: { numberOfKeys: 1, lua: releaseScript } });
  }

  /** Whether the counts are shared (false while Redis is away). */
  get healthy(): boolean {
    return this.shared.healthy;
  }

  async hit(bucket: string, limit: number, windowMs: number): Promise<HitResult> {
    return (await this.hitAll([{ bucket, limit, windowMs }]))[0];
  }

  hitAll(hits: BucketHit[]): Promise<HitResult[]> {
    return this.shared.guarded(
      async () => {
        const keys = hits.map((h) => keyOf(h.bucket, h.windowMs));
        const out = await this.shared.script<number[]>("mgRateHitAll", hits.length, ...keys, ...hits.flatMap((h) => [h.limit, h.windowMs]));
        return this.remember(hits, hits.map((_, i) => ({ count: Number(out[3 * i]), resetMs: Number(out[3 * i + 1]), allowed: Number(out[3 * i + 2]) === 1 })));
      },
      () => {
        for (const h of hits) {
          const seen = this.seen.get(h.bucket);
          if (seen) this.fallback.adopt(h.bucket, seen.count, seen.until);
        }
        return this.fallback.hitAllSync(hits);
      },
    );
  }

  /** Best effort: a refund Redis cannot take now is not worth failing the request for. */
  release(bucket: string, windowMs: number): Promise<void> {
    return this.shared.bestEffort(
      () => this.shared.script("mgRateRelease", keyOf(bucket, windowMs)),
      () => this.fallback.releaseSync(bucket),
    );
  }

  peek(bucket: string, limit: number, windowMs: number): Promise<HitResult> {
    return this.shared.guarded(
      async () => {
        const key = keyOf(bucket, windowMs);
        const [[, count], [, ttl]] = (await this.shared.transaction((multi) => multi.get(key).pttl(key))) as [[unknown, string | null], [unknown, number]];
        const n = Number(count ?? 0);
        return this.remember([{ bucket, limit, windowMs }], [{ count: n, resetMs: ttl > 0 ? ttl : windowMs, allowed: n < limit }])[0];
      },
      () => this.fallback.peek(bucket, limit, windowMs),
    );
  }

  private remember(hits: BucketHit[], results: HitResult[]): HitResult[] {
    const now = Date.now();
    hits.forEach((h, i) => this.seen.remember(h.bucket, { count: results[i].count, until: now + results[i].resetMs }));
    return results;
  }

  /** The fallback's counts go; the connection is its owner's to close. */
  async close(): Promise<void> {
    await this.fallback.close();
  }
}
