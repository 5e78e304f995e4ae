import { LastSeen, type SharedRedis } from "./shared-redis.ts";
import { MemoryTokenStore, type AmountHit, type AmountResult, type AmountSettle, type ReserveOutcome, type TokenStore } from "./token-store.ts";

/*
 * The token counters in Redis, shared exactly by replicas: one atomic script reserves in every bucket or in none,
 * one settles. A bucket is a hash: `u` the amount used, `w` the window's id (its settle must name it).
 */

/**
 * KEYS: the buckets. ARGV: per bucket limit, amount, windowMs (0: a seeded period) and the id a new window gets.
 * Answers {0, missing indexes...} when a seeded bucket is not held, else {1, taken, then per bucket used, pttl,
 * fits, window id}.
 */
const reserveScript = `
local used, ttls, held, missing = {}, {}, {}, {}
for i = 1, #KEYS do
  local window = tonumber(ARGV[4 * i - 1])
  local ttl = redis.call('PTTL', KEYS[i])
  if ttl > 0 or ttl == -1 then
    held[i] = 1
    used[i] = tonumber(redis.call('HGET', KEYS[i], 'u') or '0')
  else
    held[i] = 0
    used[i] = 0
    if window == 0 then missing[#missing + 1] = i end
  end
  ttls[i] = ttl
end
if #missing > 0 then
  local out = {0}
  for _, i in ipairs(missing) do out[#out + 1] = i end
  return out
end
local taken = 1
for i = 1, #KEYS do
  if used[i] + tonumber(ARGV[4 * i - 2]) > tonumber(ARGV[4 * i - 3]) then taken = 0 end
end
local out = {1, taken}
for i = 1, #KEYS do
  local limit, amount, window, id = tonumber(ARGV[4 * i - 3]), tonumber(ARGV[4 * i - 2]), tonumber(ARGV[4 * i - 1]), ARGV[4 * i]
  local fits = 0
  if used[i] + amount <= limit then fits = 1 end
  local u, ttl = used[i], ttls[i]
  if taken == 1 then
    if held[i] == 0 then
      redis.call('HSET', KEYS[i], 'u', amount, 'w', id)
      redis.call('PEXPIRE', KEYS[i], window)
      u, ttl = amount, window
    else
      u = redis.call('HINCRBY', KEYS[i], 'u', amount)
      id = redis.call('HGET', KEYS[i], 'w') or ''
    end
  elseif held[i] == 1 then
    id = redis.call('HGET', KEYS[i], 'w') or ''
  else
    id = ''
    ttl = window
  end
  out[#out + 1] = u
  out[#out + 1] = ttl
  out[#out + 1] = fits
  out[#out + 1] = id
end
return out
`;

/** ARGV: per bucket the delta and the window id it was reserved in; a window that ended or was replaced is left alone. */
const settleScript = `
for i = 1, #KEYS do
  if redis.call('HGET', KEYS[i], 'w') == ARGV[2 * i] then
    local u = redis.call('HINCRBY', KEYS[i], 'u', tonumber(ARGV[2 * i - 1]))
    if u < 0 then redis.call('HSET', KEYS[i], 'u', 0) end
  end
end
return 1
`;

/** Seeds a period's bucket unless another replica did first. ARGV: value, expire-at (epoch ms). */
const seedScript = `
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'u', ARGV[1], 'w', '')
  redis.call('PEXPIREAT', KEYS[1], ARGV[2])
end
return 1
`;

/** Adds to a seeded bucket that Redis still holds (one not held is seeded again from the usage table, which has it). */
const oweScript = `
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HINCRBY', KEYS[1], 'u', ARGV[1]) end
return 1
`;

const keyOf = (bucket: string) => `modelgate:tok:${bucket}`;

/** A seeded period's bucket outlives the period by this much, so settles of requests that straddle its end land. */
const periodGraceMs = 3_600_000;

let windowIds = 0;
const newWindowId = () => `${process.pid.toString(36)}.${Date.now().toString(36)}.${(++windowIds).toString(36)}`;

/**
 * The token counters shared by the replicas in Redis, under the outage policy of shared-redis.ts: while the circuit
 * is open, `redis.onError: open` counts in a memory store on this replica, which starts each token window at what
 * Redis last said of it and seeds quota and budget periods again from the usage table; `closed` answers 503.
 */
export class RedisTokenStore implements TokenStore {
  private readonly fallback = new MemoryTokenStore();
  /** What Redis last said of each rolling window (used, when it ends), for the fallback to start from. */
  private readonly seen = new LastSeen<{ used: number; until: number }>();
  /**
   * Issue 47: what this replica counted in seeded periods (quotas, budgets) while Redis was away, added to Redis
   * once it answers again, so a day's counter still equals the day's usage after an outage. Rolling windows are
   * left to close.
   */
  private readonly owed = new Map<string, number>();

  constructor(private readonly shared: SharedRedis) {
    shared.defineScripts({ mgTokReserve: { lua: reserveScript }, mgTokSettle: { lua: settleScript }, mgTokSeed: { numberOfKeys: 1, lua: seedScript }, mgTokOwe: { numberOfKeys: 1, lua: oweScript } });
  }

  reserve(hits: AmountHit[]): Promise<ReserveOutcome> {
    return this.shared.guarded(
      async () => {
        await this.payOwed();
        const outcome = await this.reserveShared(hits);
        if (!outcome.missing) this.remember(hits, outcome.results);
        return outcome;
      },
      () => {
        for (const h of hits) {
          const seen = h.windowMs !== undefined ? this.seen.get(h.bucket) : undefined;
          if (seen) this.fallback.adopt(h.bucket, seen.used, seen.until);
        }
        const outcome = this.fallback.reserveSync(hits);
        if (!outcome.missing && outcome.taken) for (const h of hits) if (h.windowMs === undefined) this.owe(h.bucket, h.amount);
        return outcome;
      },
    );
  }

  private owe(bucket: string, amount: number): void {
    this.owed.set(bucket, (this.owed.get(bucket) ?? 0) + amount);
  }

  /** Adds what is owed to Redis, each bucket once (one that fails stays owed). */
  private async payOwed(): Promise<void> {
    for (const [bucket, amount] of this.owed) {
      this.owed.delete(bucket);
      if (amount === 0) continue;
      try {
        await this.shared.script("mgTokOwe", keyOf(bucket), amount);
      } catch (err) {
        this.owe(bucket, amount);
        throw err;
      }
    }
  }

  private async reserveShared(hits: AmountHit[]): Promise<ReserveOutcome> {
    const args = hits.flatMap((h) => [h.limit, h.amount, h.windowMs ?? 0, newWindowId()]);
    const out = await this.shared.script<(number | string)[]>("mgTokReserve", hits.length, ...hits.map((h) => keyOf(h.bucket)), ...args);
    if (Number(out[0]) === 0) return { missing: out.slice(1).map((i) => hits[Number(i) - 1].bucket) };
    const now = Date.now();
    const results: AmountResult[] = hits.map((h, i) => {
      const base = 2 + 4 * i;
      const ttl = Number(out[base + 1]);
      return {
        used: Number(out[base]),
        resetMs: h.windowMs === undefined ? Math.max(0, (h.expireAt ?? now) - now) : ttl > 0 ? ttl : h.windowMs,
        fits: Number(out[base + 2]) === 1,
        windowId: String(out[base + 3] ?? ""),
      };
    });
    return { missing: null, taken: Number(out[1]) === 1, results };
  }

  private remember(hits: AmountHit[], results: AmountResult[]): void {
    const now = Date.now();
    hits.forEach((h, i) => {
      if (h.windowMs !== undefined) this.seen.remember(h.bucket, { used: results[i].used, until: now + results[i].resetMs });
    });
  }

  /** Best effort, like the request limiter's release: a settle Redis cannot take now does not fail the request. */
  settle(settles: AmountSettle[]): Promise<void> {
    const live = settles.filter((s) => s.delta !== 0);
    if (live.length === 0) return Promise.resolve();
    return this.shared.bestEffort(
      async () => {
        await this.payOwed();
        await this.shared.script("mgTokSettle", live.length, ...live.map((s) => keyOf(s.bucket)), ...live.flatMap((s) => [s.delta, s.windowId]));
      },
      () => {
        this.fallback.settleSync(live);
        // A seeded period's settle ("" names it in both stores) is owed to Redis too, whichever store reserved it.
        for (const s of live) if (s.windowId === "") this.owe(s.bucket, s.delta);
      },
    );
  }

  peek(hits: AmountHit[]): Promise<AmountResult[]> {
    return this.shared.guarded(
      async () => {
        const results = await this.peekShared(hits);
        this.remember(hits, results);
        return results;
      },
      () => this.fallback.peekSync(hits),
    );
  }

  private async peekShared(hits: AmountHit[]): Promise<AmountResult[]> {
    const answers = await this.shared.transaction((multi) => {
      for (const h of hits) multi.hget(keyOf(h.bucket), "u").pttl(keyOf(h.bucket)).hget(keyOf(h.bucket), "w");
      return multi;
    });
    const now = Date.now();
    return hits.map((h, i) => {
      const used = Number(answers[3 * i]?.[1] ?? 0);
      const ttl = Number(answers[3 * i + 1]?.[1] ?? -2);
      const resetMs = h.windowMs === undefined ? Math.max(0, (h.expireAt ?? now) - now) : ttl > 0 ? ttl : h.windowMs;
      return { used, resetMs, fits: used + h.amount <= h.limit, windowId: String(answers[3 * i + 2]?.[1] ?? "") };
    });
  }

  seed(bucket: string, value: number, expireAt: number): Promise<void> {
    return this.shared.guarded(
      async () => void (await this.shared.script("mgTokSeed", keyOf(bucket), value, expireAt + periodGraceMs)),
      () => this.fallback.seedSync(bucket, value, expireAt),
    );
  }

  /** The fallback's counts go; the connection is its owner's to close. */
  async close(): Promise<void> {
    await this.fallback.close();
  }
}
