import fp from "fastify-plugin";
import type { FastifyError, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from "fastify";
import { formatResetDuration } from "../config/duration.ts";
import { AppError } from "../errors/app-error.ts";
import { addressBucket } from "./rate-limit/address-bucket.ts";
import { MemoryStore } from "./rate-limit/memory-store.ts";
import { RedisStore } from "./rate-limit/redis-store.ts";
import type { SharedRedis } from "./rate-limit/shared-redis.ts";
import type { BucketHit, HitResult, RateLimitStore } from "./rate-limit/store.ts";

/** §8 request limits, decorated on the app as `limits`; the scopes decide which runs where. */
export interface Limits {
  /**
   * The plan's limits of the request's key: its own bucket and its account's (all the account's keys together),
   * both counted or neither; the /v1 scope runs it after auth and the IP allowlist.
   */
  key(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void;
  /** The per-address limiter for requests without a usable key (401, 403 ip_not_allowed, admin auth failures). */
  anonymous(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  /** The anonymous limiter's headers for the address, without counting this request (admin answers). */
  anonymousHeadersOnly(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  /**
   * The anonymous limiter counted for an address, outside any request (answers the HTTP layer writes itself, on the
   * socket): its headers, and whether the address is over its limit.
   */
  anonymousHeaders(address: string): Promise<{ headers: Record<string, string>; allowed: boolean; resetMs: number }>;
  /**
   * Counts an attempt to authenticate before the credential is checked: a well-formed key this node has not seen
   * valid (before its database lookup), or an admin token (before it is compared, and then also against the budget
   * of failed admin-token attempts from all addresses together). 429 when the address (or that budget) is spent,
   * whatever the credential. Call `accepted` when the credential was right: the attempt is then not counted after
   * all (an admin answer's headers show that; a key's request gets the key's headers next).
   */
  anonymousAttempt(request: FastifyRequest, reply: FastifyReply, credential: "key" | "admin-token"): Promise<{ accepted: () => Promise<void> }>;
  /**
   * Counts a console sign-in before the password is checked: against the address (the anonymous limiter) and
   * against the email, from all addresses together (`console.loginFailureLimit`), so neither one address trying many
   * emails nor many addresses trying one email get far. 429 when either is spent, whatever the password. `accepted`
   * takes the attempt back after a successful sign-in.
   */
  signInAttempt(request: FastifyRequest, reply: FastifyReply, email: string): Promise<{ accepted: () => Promise<void> }>;
}

declare module "fastify" {
  interface FastifyInstance {
    limits: Limits;
    /** False while the shared limiter (Redis) is unreachable. */
    limiterHealthy: () => boolean;
  }
}

type Counted = BucketHit & { result: HitResult };

const headersOf = ({ limit, result }: Counted): Record<string, string> => ({
  "x-ratelimit-limit-requests": String(limit),
  "x-ratelimit-remaining-requests": String(result.allowed ? Math.max(0, limit - result.count) : 0),
  "x-ratelimit-reset-requests": formatResetDuration(result.resetMs / 1000),
});

/**
 * The bucket a request's rate-limit headers show when several count it (the OpenAI convention): the most
 * constraining one, that is one that refused it, else the one with the fewest requests left; on a tie, the one
 * that frees last.
 */
function mostConstraining(counted: Counted[]): Counted {
  return counted.reduce((a, b) => (remaining(b) < remaining(a) || (remaining(b) === remaining(a) && b.result.resetMs > a.result.resetMs) ? b : a));
}

/** A bucket's requests left (-1: it refused). Module-level: tsx's keepNames makes every named closure cost a defineProperty. */
const remaining = (c: Counted) => (c.result.allowed ? c.limit - c.result.count : -1);

/**
 * Headers go on with reply.header before anything can fail, so every response carries them, errors included; a
 * refused request is answered 429 with Retry-After and is not counted.
 */
export const rateLimitPlugin = fp(
  async (app, opts: { redis: SharedRedis | null }) => {
    const store: RateLimitStore = opts.redis ? new RedisStore(opts.redis) : new MemoryStore();
    app.decorate("limiterHealthy", () => !(store instanceof RedisStore) || store.healthy);
    app.ctx.onClose(() => store.close());
    const { anonymousRateLimit: anonymous, adminTokenFailureLimit: adminFailures } = app.ctx.config;
    const anonymousHit = (address: string): BucketHit => ({ bucket: `a:${addressBucket(address, anonymous.ipv6Prefix)}`, limit: anonymous.requests, windowMs: anonymous.windowMs });
    // Shared by this deployment's replicas (through Redis), not by other deployments that use the same Redis.
    const adminFailuresHit: BucketHit = { bucket: `admin-token-failures:${app.ctx.config.deployment}`, limit: adminFailures.requests, windowMs: adminFailures.windowMs };

    /** The memory store counts at once: with it, a key without token windows is limited without a promise. */
    const countsNow = store instanceof MemoryStore ? store : null;

    const withResults = (hits: BucketHit[], results: HitResult[]): Counted[] =>
      hits.map(({ bucket, limit, windowMs }, i) => ({ bucket, limit, windowMs, result: results[i] }));

    async function countAll(hits: BucketHit[]): Promise<Counted[]> {
      return withResults(hits, await store.hitAll(hits));
    }

    /** 429 when a bucket refused the request, Retry-After when all of them have room again. */
    function refuseIfOver(counted: Counted[], describe: (refusing: Counted) => string): void {
      const refusing = counted.filter((c) => !c.result.allowed);
      if (refusing.length === 0) return;
      const last = refusing.reduce((a, b) => (b.result.resetMs > a.result.resetMs ? b : a));
      throw new AppError("rate_limit_exceeded", { message: `${describe(last)} Retry after the time given in Retry-After.`, retryAfterMs: last.result.resetMs });
    }

    const keyOrAccount = (c: Counted) => (c.bucket.startsWith("acct:") ? " for this account" : " for this key");
    const exceeded = (c: Counted, what = "") => `Rate limit of ${c.limit} requests per ${formatResetDuration(c.windowMs / 1000)}${what} exceeded.`;

    async function count(reply: FastifyReply, hits: BucketHit[], what: (c: Counted) => string = () => ""): Promise<void> {
      answer(reply, await countAll(hits), what);
    }

    function answer(reply: FastifyReply, counted: Counted[], what: (c: Counted) => string): void {
      reply.headers(headersOf(mostConstraining(counted)));
      refuseIfOver(counted, (c) => exceeded(c, what(c)));
    }

    async function countWithTokenHeaders(reply: FastifyReply, hits: BucketHit[], what: (c: Counted) => string, tokenHeaders: Promise<Record<string, string> | null> | null) {
      try {
        await count(reply, hits, what);
      } finally {
        const headers = await tokenHeaders;
        if (headers) reply.headers(headers);
      }
    }

    async function counted(address: string) {
      const [one] = await countAll([anonymousHit(address)]);
      return { headers: headersOf(one), allowed: one.result.allowed, resetMs: one.result.resetMs };
    }

    // Logged once per window in which the budget ran out, not once per refused attempt.
    let adminBudgetTrippedUntil = 0;

    app.decorate("limits", {
      anonymous: (request, reply) => count(reply, [anonymousHit(request.clientIp)]),
      anonymousHeaders: (address) => counted(address),
      async anonymousHeadersOnly(request, reply) {
        const hit = anonymousHit(request.clientIp);
        reply.headers(headersOf({ ...hit, result: await store.peek(hit.bucket, hit.limit, hit.windowMs) }));
      },
      key(request, reply, done) {
        const auth = request.auth;
        if (!auth) return done();
        const { rateLimit, accountRateLimit } = auth.plan;
        const account = `acct:${auth.accountId}`;
        const hits = [
          { bucket: `k:${auth.keyId}`, limit: rateLimit.requests, windowMs: rateLimit.windowMs },
          { bucket: account, limit: accountRateLimit.requests, windowMs: accountRateLimit.windowMs },
        ];
        // The key's token windows (issue 32), read alongside the request count: every /v1 answer carries their
        // headers, errors included; a store that cannot answer leaves them out (the reservation decides).
        const tokenHeaders = app.ctx.tokens.headers(auth)?.catch(() => null) ?? null;
        if (countsNow && !tokenHeaders) {
          try {
            answer(reply, withResults(hits, countsNow.hitAllSync(hits)), keyOrAccount);
          } catch (err) {
            return done(err as FastifyError);
          }
          return done();
        }
        countWithTokenHeaders(reply, hits, keyOrAccount, tokenHeaders).then(() => done(), done);
      },
      async signInAttempt(request, reply, email) {
        const address = anonymousHit(request.clientIp);
        const { requests, windowMs } = app.ctx.config.console.loginFailureLimit;
        const byEmail: BucketHit = { bucket: `sign-in:${app.ctx.config.deployment}:${email}`, limit: requests, windowMs };
        const counted = await countAll([address, byEmail]);
        reply.headers(headersOf(counted[0]));
        refuseIfOver(counted, (c) => (c.bucket === byEmail.bucket ? "Too many failed sign-ins for this email." : exceeded(c)));
        return {
          async accepted() {
            await Promise.all([address, byEmail].map((h) => store.release(h.bucket, h.windowMs)));
          },
        };
      },
      async anonymousAttempt(request, reply, credential) {
        const address = anonymousHit(request.clientIp);
        const hits = credential === "admin-token" ? [address, adminFailuresHit] : [address];
        const counted = await countAll(hits);
        const [byAddress, budget] = counted;
        reply.headers(headersOf(byAddress));
        if (budget && !budget.result.allowed && Date.now() >= adminBudgetTrippedUntil) {
          adminBudgetTrippedUntil = Date.now() + budget.result.resetMs;
          request.log.warn(
            { limit: adminFailures.requests, windowMs: adminFailures.windowMs, retryAfterMs: budget.result.resetMs },
            "the budget of failed admin-token attempts (all addresses) is spent: every admin-token attempt is refused until the window ends",
          );
        }
        refuseIfOver(counted, (c) => (c === budget ? "Too many failed admin-token attempts from all addresses." : exceeded(c)));
        return {
          async accepted() {
            await Promise.all(hits.map((h) => store.release(h.bucket, h.windowMs)));
            // A key's own limiter sets the headers next; an admin answer shows the address's window as it now is.
            if (credential === "admin-token") reply.headers(headersOf({ ...address, result: await store.peek(address.bucket, address.limit, address.windowMs) }));
          },
        };
      },
    } satisfies Limits);
  },
  { name: "limits" },
);
