import { Redis } from "ioredis";
import type { HitResult, RateLimitStore } from "./store.ts";

/**
 * Count-unless-full in one atomic step, so replicas sharing Redis never over-admit: a full window answers without
 * incrementing (a 429 is not counted), an expired or new window starts at 1 with the window as its TTL.
 */
const hitScript = `
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local ttl = redis.call('PTTL', KEYS[1])
if ttl <= 0 then
  redis.call('SET', KEYS[1], 1, 'PX', window)
  return {1, window, 1}
end
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
if count >= limit then
  return {count, ttl, 0}
end
count = redis.call('INCR', KEYS[1])
return {count, ttl, 1}
`;

type HitCommand = (key: string, limit: number, windowMs: number) => Promise<[number, number, number]>;

/**
 * The shared limiter in Redis. It fails fast (a short command timeout, no offline queue): an unreachable Redis
 * throws at once and the caller (ResilientStore) decides what happens.
 */
export class RedisStore implements RateLimitStore {
  private constructor(private readonly redis: Redis) {}

  /** Connects first, so a wrong REDIS_URL fails the start instead of every request. */
  static async connect(url: string): Promise<RedisStore> {
    const redis = new Redis(url, {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: 250,
      connectTimeout: 1000,
      // No ready check: after a partition, a connection that TCP accepted but Redis never answers would hang in
      // its ready check for seconds; without one, commands time out on it and it is replaced (`timed`, below).
      enableReadyCheck: false,
      // Reconnect quickly, so limits come back within a second of Redis returning.
      retryStrategy: (attempt) => Math.min(50 * attempt, 250),
    });
    redis.on("error", () => {
      // Failed commands reject and are handled by the caller; ioredis reconnects on its own.
    });
    redis.defineCommand("mgRateHit", { numberOfKeys: 1, lua: hitScript });
    await redis.connect();
    return new RedisStore(redis);
  }

  async hit(bucket: string, limit: number, windowMs: number): Promise<HitResult> {
    const [count, resetMs, allowed] = await this.timed((this.redis as unknown as { mgRateHit: HitCommand }).mgRateHit(`modelgate:rl:${bucket}:${windowMs}`, limit, windowMs));
    return { count: Number(count), resetMs: Number(resetMs), allowed: Number(allowed) === 1 };
  }

  async peek(bucket: string, limit: number, windowMs: number): Promise<HitResult> {
    const key = `modelgate:rl:${bucket}:${windowMs}`;
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
