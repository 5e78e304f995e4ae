import { Redis } from "ioredis";

/** A Lua script to define on the connection, as ioredis's defineCommand takes it. */
export interface RedisScript {
  lua: string;
  numberOfKeys?: number;
}

/**
 * A Redis connection for a limiter that fails fast: no offline queue, no retries, a short command timeout, so an
 * unreachable Redis throws at once and the caller's outage policy decides what happens. Connects first, so a wrong
 * REDIS_URL fails the start instead of every request.
 */
export async function connectFailFast(url: string, commandTimeoutMs: number, scripts: Record<string, RedisScript>): Promise<Redis> {
  const redis = new Redis(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: commandTimeoutMs,
    connectTimeout: 1000,
    // No ready check: after a partition, a connection that TCP accepted but Redis never answers would hang in
    // its ready check for seconds; without one, commands time out on it and it is replaced (the stores' `timed`).
    enableReadyCheck: false,
    // Without a ready check, ioredis 5.9 marks a reconnection ready once its CLIENT SETINFO calls settle, even when
    // the socket closed meanwhile (a Redis refusing connections): the client then stays "ready" on a dead socket and
    // never reconnects (redis/ioredis#2099). No SETINFO, no window.
    disableClientInfo: true,
    // Reconnect quickly, so limits come back within a second of Redis returning.
    retryStrategy: (attempt) => Math.min(50 * attempt, 250),
  });
  redis.on("error", () => {
    // Failed commands reject and are handled by the caller; ioredis reconnects on its own.
  });
  for (const [name, script] of Object.entries(scripts)) redis.defineCommand(name, script);
  await redis.connect();
  return redis;
}
