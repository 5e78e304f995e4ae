import type { FastifyBaseLogger } from "fastify";
import type { MeterSubject, TokenAmount, TokenGate, TokenReservation } from "../app-context.ts";
import type { AppConfig } from "../config/app-config.ts";
import { formatResetDuration } from "../config/duration.ts";
import { costMicro, formatMoney, type Pricing } from "../config/money.ts";
import { calendarPeriod, utcDay } from "../config/periods.ts";
import { AppError } from "../errors/app-error.ts";
import { MemoryTokenStore, type AmountHit, type AmountResult, type TokenStore } from "./rate-limit/token-store.ts";
import { RedisTokenStore } from "./rate-limit/token-redis-store.ts";
import type { SharedRedis } from "./rate-limit/shared-redis.ts";

/** What the meter needs from the rest of the server: the usage table (quotas and budgets are rebuilt from it). */
export interface MeterDeps {
  config: AppConfig;
  /** The Redis the replicas share their limits in; null: this process counts alone. */
  redis: SharedRedis | null;
  log: FastifyBaseLogger;
  /** The account's tokens per model over a period's days (the usage table). */
  periodTotals(accountId: string, firstDay: string, lastDay: string): Promise<{ model: string; promptTokens: number; completionTokens: number }[]>;
  /** Writes this replica's pending usage, so a period seeded now counts it. */
  flushUsage(): Promise<void>;
  /** The budget gauge: the share of the account's budget used (0..1+). */
  budgetUsed?(accountId: string, ratio: number): void;
}

type Kind = "key" | "account" | "quota" | "budget";
interface Hit extends AmountHit {
  kind: Kind;
  /** A budget's or quota's period, for messages. */
  period?: "day" | "month";
  /** That period's days, for seeding it from the usage table. */
  days?: { firstDay: string; lastDay: string };
}

/** A budget crosses this share of its amount: one warning line per account and period (per replica). */
const budgetWarnAt = 0.8;

/**
 * Token limits per key and per account (rolling windows), token quotas and budgets per account (UTC calendar
 * periods), counted in one TokenStore: Redis for replicas (exact: one script reserves in every bucket or none),
 * else this process's memory. Quotas and budgets are seeded from the usage table, so neither a restart nor a
 * Redis flush resets them.
 */
export class TokenMeter implements TokenGate {
  private readonly warned = new Set<string>();

  private constructor(
    private readonly store: TokenStore,
    private readonly deps: MeterDeps,
  ) {}

  static create(deps: MeterDeps): TokenMeter {
    return new TokenMeter(deps.redis ? new RedisTokenStore(deps.redis) : new MemoryTokenStore(), deps);
  }

  close(): Promise<void> {
    return this.store.close();
  }

  private pricing(model: string): Pricing | null {
    return this.deps.config.models.find((m) => m.id === model)?.pricing ?? null;
  }

  private windowHits(subject: MeterSubject, tokens: number): Hit[] {
    const { tokenLimit, accountTokenLimit } = subject.plan;
    const hits: Hit[] = [];
    if (tokenLimit) hits.push({ kind: "key", bucket: `k:${subject.keyId}:${tokenLimit.windowMs}`, limit: tokenLimit.tokens, amount: tokens, windowMs: tokenLimit.windowMs });
    if (accountTokenLimit) hits.push({ kind: "account", bucket: `a:${subject.accountId}:${accountTokenLimit.windowMs}`, limit: accountTokenLimit.tokens, amount: tokens, windowMs: accountTokenLimit.windowMs });
    return hits;
  }

  /** The buckets a request counts in; quotas' and budgets' periods are the ones `now` is in. */
  private hits(subject: MeterSubject, model: string, amount: TokenAmount, now: number): Hit[] {
    const tokens = amount.promptTokens + amount.completionTokens;
    const hits = this.windowHits(subject, tokens);
    const { quota } = subject.plan;
    if (quota) {
      const p = calendarPeriod(quota.period, now);
      hits.push({ kind: "quota", bucket: `q:${subject.accountId}:${p.id}`, limit: quota.tokens, amount: tokens, expireAt: p.endsAt, period: quota.period, days: p });
    }
    // An account's own budget is already in its plan here (auth/effective-limits.ts resolves every key's plan).
    const budget = subject.plan.budget;
    if (budget) {
      const p = calendarPeriod(budget.period, now);
      const cost = costMicro(this.pricing(model), amount.promptTokens, amount.completionTokens, "ceil");
      hits.push({ kind: "budget", bucket: `b:${subject.accountId}:${p.id}`, limit: budget.amountMicro, amount: cost, expireAt: p.endsAt, period: budget.period, days: p });
    }
    return hits;
  }

  headers(subject: MeterSubject): Promise<Record<string, string>> | null {
    const hits = this.windowHits(subject, 0);
    if (hits.length === 0) return null;
    return this.store.peek(hits).then((results) => headersOf(hits, results));
  }

  reserve(subject: MeterSubject, model: string, amount: TokenAmount, setHeaders?: (headers: Record<string, string>) => void): Promise<TokenReservation | null> | null {
    const now = Date.now();
    const hits = this.hits(subject, model, amount, now);
    return hits.length === 0 ? null : this.reserveHits(subject, model, hits, now, setHeaders);
  }

  private async reserveHits(subject: MeterSubject, model: string, hits: Hit[], now: number, setHeaders?: (headers: Record<string, string>) => void): Promise<TokenReservation | null> {
    let outcome = await this.store.reserve(hits);
    for (let attempt = 0; outcome.missing && attempt < 3; attempt++) {
      const unseeded = await this.seed(subject, outcome.missing, hits);
      if (unseeded.length > 0) hits = hits.filter((h) => !unseeded.includes(h.bucket));
      if (hits.length === 0) return null;
      outcome = await this.store.reserve(hits);
    }
    if (outcome.missing) throw new AppError("overloaded", { message: "The token quota could not be checked; retry shortly.", retryAfterMs: 1000 });
    const { results, taken } = outcome;
    const windows = hits.map((h, i) => [h, results[i]] as const).filter(([h]) => h.kind === "key" || h.kind === "account");
    if (windows.length > 0) setHeaders?.(headersOf(windows.map(([h]) => h), windows.map(([, r]) => r), taken ? 0 : null));
    this.watchBudget(subject, hits, results, taken);
    if (!taken) throw this.refusal(hits, results);
    let settled = false;
    return {
      day: utcDay(now),
      settle: async (used) => {
        if (settled) return;
        settled = true;
        const usedTokens = used ? used.promptTokens + used.completionTokens : 0;
        const cost = used ? costMicro(this.pricing(model), used.promptTokens, used.completionTokens, "ceil") : 0;
        await this.store.settle(hits.map((h, i) => ({ bucket: h.bucket, windowId: results[i].windowId, delta: (h.kind === "budget" ? cost : usedTokens) - h.amount })));
      },
    };
  }

  /**
   * Seeds the quota and budget buckets the store does not hold from the usage table (this replica's pending usage
   * written first). Returns the buckets left unseeded because the database could not be read: with
   * `redis.onError: open` the request goes on without them (logged), with `closed` it is 503.
   */
  private async seed(subject: MeterSubject, missing: string[], hits: Hit[]): Promise<string[]> {
    const unseeded: string[] = [];
    for (const bucket of missing) {
      const hit = hits.find((h) => h.bucket === bucket)!;
      const p = hit.days!;
      try {
        await this.deps.flushUsage().catch(() => {});
        const rows = await this.deps.periodTotals(subject.accountId, p.firstDay, p.lastDay);
        const value =
          hit.kind === "quota"
            ? rows.reduce((sum, r) => sum + r.promptTokens + r.completionTokens, 0)
            : rows.reduce((sum, r) => sum + costMicro(this.pricing(r.model), r.promptTokens, r.completionTokens, "ceil"), 0);
        await this.store.seed(bucket, value, hit.expireAt!);
      } catch (err) {
        if (err instanceof AppError) throw err;
        if (this.deps.config.redisOnError === "closed") throw new AppError("overloaded", { message: `The account's ${hit.kind} cannot be checked while the database is unreachable; retry shortly.`, retryAfterMs: 1000 });
        this.deps.log.warn({ err, account: subject.accountId, bucket }, `the account's ${hit.kind} could not be rebuilt from the usage table; this request is not checked against it`);
        unseeded.push(bucket);
      }
    }
    return unseeded;
  }

  /** The budget gauge, and one warning line when the account's spend (with reservations in flight) crosses 80%. */
  private watchBudget(subject: MeterSubject, hits: Hit[], results: AmountResult[], taken: boolean): void {
    const i = hits.findIndex((h) => h.kind === "budget");
    if (i < 0) return;
    const hit = hits[i];
    const used = taken ? results[i].used - hit.amount : results[i].used;
    const ratio = hit.limit > 0 ? used / hit.limit : 1;
    this.deps.budgetUsed?.(subject.accountId, ratio);
    if (ratio >= budgetWarnAt && !this.warned.has(hit.bucket)) {
      this.warned.add(hit.bucket);
      if (this.warned.size > 10_000) this.warned.delete(this.warned.values().next().value!);
      const currency = this.deps.config.currency;
      this.deps.log.warn(
        { account: subject.accountId, spent: formatMoney(used), budget: formatMoney(hit.limit), currency, period: hit.period },
        `account ${subject.accountId} has used ${Math.floor(ratio * 100)}% of its ${hit.period}ly budget of ${formatMoney(hit.limit)} ${currency}`,
      );
    }
  }

  /** 429 rate_limit_exceeded naming the limit that refused, Retry-After when the last refusing one resets. */
  private refusal(hits: Hit[], results: AmountResult[]): AppError {
    const refusing = hits.map((h, i) => [h, results[i]] as const).filter(([, r]) => !r.fits);
    const [hit, result] = refusing.reduce((a, b) => (b[1].resetMs > a[1].resetMs ? b : a));
    const left = Math.max(0, hit.limit - result.used);
    const resetsAt = new Date(Date.now() + result.resetMs).toISOString().replace(/\.\d+Z$/, "Z");
    const currency = this.deps.config.currency;
    let message: string;
    switch (hit.kind) {
      case "key":
      case "account": {
        const whose = hit.kind === "key" ? "this key" : "this account";
        message =
          `Rate limit of ${hit.limit} tokens per ${formatResetDuration(hit.windowMs! / 1000)} for ${whose} exceeded: ` +
          `this request reserves ${hit.amount} tokens (its prompt and completion cap; lower max_tokens to reserve fewer) and ${left} are left. ` +
          `Retry after the time given in Retry-After.`;
        break;
      }
      case "quota":
        message =
          (left === 0 ? `The account's token quota of ${hit.limit} tokens per ${hit.period} is exhausted` : `The account's token quota of ${hit.limit} tokens per ${hit.period} has ${left} tokens left, fewer than this request reserves (${hit.amount}, its prompt and completion cap)`) +
          `; it resets at ${resetsAt} (00:00 UTC).`;
        break;
      case "budget":
        message =
          (left === 0
            ? `The account's budget of ${formatMoney(hit.limit)} ${currency} per ${hit.period} is exhausted`
            : `The account's budget of ${formatMoney(hit.limit)} ${currency} per ${hit.period} has ${formatMoney(left)} ${currency} left, less than this request may cost (${formatMoney(hit.amount)} ${currency} for its prompt and completion cap)`) +
          `; it resets at ${resetsAt} (00:00 UTC).`;
        break;
    }
    return new AppError("rate_limit_exceeded", { message, retryAfterMs: Math.max(1000, result.resetMs) });
  }
}

/**
 * The token headers, OpenAI's names: the most constraining window (fewest tokens left; on a tie, the one that
 * frees last). `pending` is what the reservation took (0 when taken: `used` includes it), or null when refused.
 */
function headersOf(hits: AmountHit[], results: AmountResult[], _pending: number | null = 0): Record<string, string> {
  let best = 0;
  const left = (i: number) => Math.max(0, hits[i].limit - results[i].used);
  for (let i = 1; i < hits.length; i++) {
    if (left(i) < left(best) || (left(i) === left(best) && results[i].resetMs > results[best].resetMs)) best = i;
  }
  return {
    "x-ratelimit-limit-tokens": String(hits[best].limit),
    "x-ratelimit-remaining-tokens": String(left(best)),
    "x-ratelimit-reset-tokens": formatResetDuration(results[best].resetMs / 1000),
  };
}
