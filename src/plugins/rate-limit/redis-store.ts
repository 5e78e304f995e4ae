import type { Redis } from "ioredis";
import { connectFailFast } from "./redis-connection.ts";
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

type HitCommand = (...args: (string | number)[]) => Promise<number[]>;
type ReleaseCommand = (key: string) => Promise<number>;

const keyOf = (bucket: string, windowMs: number) => `modelgate:rl:${bucket}:${windowMs}`;

/**
 * The shared limiter in Redis. It fails fast (a short command timeout, no offline queue): an unreachable Redis
 * throws at once and the caller (ResilientStore) decides what happens.
 */
export class RedisStore implements RateLimitStore {
  private constructor(private readonly redis: Redis) {}

  /** Connects first, so a wrong REDIS_URL fails the start instead of every request. */
  static async connect(url: string): Promise<RedisStore> {
    return new RedisStore(await connectFailFast(url, 250, { mgRateHitAll: { lua: hitScript }, mgRateRelease: { numberOfKeys: 1, lua: releaseScript } }));
  }

  async hit(bucket: string, limit: number, windowMs: number): Promise<HitResult> {
    return (await this.hitAll([{ bucket, limit, windowMs }]))[0];
  }

  async hitAll(hits: BucketHit[]): Promise<HitResult[]> {
    const command = (this.redis as unknown as { mgRateHitAll: HitCommand }).mgRateHitAll;
    const keys = hits.map((h) => keyOf(h.bucket, h.windowMs));
    const out = await this.timed(command.call(this.redis, hits.length, ...keys, ...hits.flatMap((h) => [h.limit, h.windowMs])));
    return hits.map((_, i) => ({ count: Number(out[3 * i]), resetMs: Number(out[3 * i + 1]), allowed: Number(out[3 * i + 2]) === 1 }));
  }

  async release(bucket: string, windowMs: number): Promise<void> {
    await this.timed((this.redis as unknown as { mgRateRelease: ReleaseCommand }).mgRateRelease(keyOf(bucket, windowMs)));
  }

  async peek(bucket: string, limit: number, windowMs: number): Promise<HitResult> {
    const key = keyOf(bucket, windowMs);
    const [[, count], [, ttl]] = (await this.timed(this.redis.multi().get(key).pttl(key).exec())) as [[unknown, string | null], [unknown, number]];
    const n = Number(count ?? 0);
    return { count: n, resetMs: ttl > 0 ? ttl : windowMs, allowed: n < limit };
  }

  async ping(): Promise<void> {
    await this.timed(this.redis.ping());
  }

  /** A command that timed out means the connection may be dead while open (a partition): it is replaced. */
  private async timed<T>(command: Promise<T>): Promise<T> {
    try {
      return await command;
    } catch (err) {
      // Destroyed, not ended: a graceful close would wait seconds for a peer that does not answer. ioredis then
      // reconnects by its retryStrategy.
      if (/timed out/i.test((err as Error).message)) this.redis.stream?.destroy();
      throw err;
    }
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
}
