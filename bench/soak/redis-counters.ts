import { Redis } from "ioredis";
import type { Check } from "./checks.ts";

/**
 * The token counters in Redis once the windows closed: no window counter is left without an expiry (it would never
 * close), and each account's day quota counter equals the usage table's tokens for the day (reservations settled),
 * but for the reservations of requests a replica killed with -9 never settled: at most their `bound`.
 */
export async function redisChecks(url: string, accounts: { id: string; bound: number }[], tokensToday: Map<string, number>): Promise<Check[]> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  try {
    const day = new Date().toISOString().slice(0, 10);
    const windowKeys = [...(await redis.keys("modelgate:tok:k:*")), ...(await redis.keys("modelgate:tok:a:*"))];
    const forever = [];
    for (const key of windowKeys) if ((await redis.pttl(key)) === -1) forever.push(key);
    const checks: Check[] = [{ name: "token-limit windows close (every counter has an expiry)", pass: forever.length === 0, detail: `${windowKeys.length} window counters left; without expiry: ${forever.length}` }];
    for (const { id, bound } of accounts) {
      const used = Number((await redis.hget(`modelgate:tok:q:${id}:${day}`, "u")) ?? Number.NaN);
      const table = tokensToday.get(id) ?? 0;
      checks.push({ name: `quota counter in Redis == usage table (account ${id})`, pass: used >= table && used <= table + bound, detail: `Redis ${used}, usage table ${table} (+${used - table}; requests cut short may hold up to ${bound})` });
    }
    return checks;
  } finally {
    redis.disconnect();
  }
}
