import type { Redis, RedisOptions } from "ioredis";

/**
 * A new ioredis client. The module is loaded at the first one, so a deployment without Redis never loads it (about
 * 90 ms of CPU at every start, and in every process the tests spawn).
 */
export async function newRedis(url: string, options: RedisOptions): Promise<Redis> {
  const { Redis } = await import("ioredis");
  return new Redis(url, options);
}
