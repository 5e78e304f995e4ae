import type { Redis } from "ioredis";
import { newRedis } from "../../store/redis-client.ts";

/**
 * A Redis connection that fails fast: no offline queue, no retries, a command timeout, so an unreachable Redis throws
 * at once and the caller's outage policy decides what happens (the limiters' shared circuit, the response cache's
 * bypass). Connects first, so a wrong REDIS_URL fails the start instead of every request.
 */
export async function connectFailFast(url: string, commandTimeoutMs: number): Promise<Redis> {
  const redis = await newRedis(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: commandTimeoutMs,
    connectTimeout: 1000,
    // No ready check: after a partition, a connection that TCP accepted but Redis never answers would hang in
    // its ready check for seconds; without one, commands time out on it and it is replaced by its owner.
    enableReadyCheck: false,
    // Nor CLIENT SETINFO, which ioredis otherwise awaits before the connection is ready: on a dead connection it would
    // hold every command off for a whole command timeout, and a reconnection to a Redis refusing connections could be
    // marked ready on a closed socket and never reconnect (redis/ioredis#2099).
    disableClientInfo: true,
    // Reconnect quickly, so shared state comes back within a second of Redis returning.
    retryStrategy: (attempt) => Math.min(50 * attempt, 250),
  });
  redis.on("error", () => {
    // Failed commands reject and are handled by the caller; ioredis reconnects on its own.
  });
  await redis.connect();
  return redis;
}
