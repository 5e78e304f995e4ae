import fp from "fastify-plugin";
import type { FastifyReply, FastifyRequest } from "fastify";
import { formatResetDuration } from "../config/duration.ts";
import { AppError } from "../errors/app-error.ts";
import { MemoryStore } from "./rate-limit/memory-store.ts";
import { RedisStore } from "./rate-limit/redis-store.ts";
import { ResilientStore } from "./rate-limit/resilient-store.ts";
import type { RateLimitStore } from "./rate-limit/store.ts";

/** §8 request limits, decorated on the app as `limits`; the scopes decide which runs where. */
export interface Limits {
  /** The key's plan limit; the /v1 scope runs it after auth and the IP allowlist. */
  key(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  /** The per-address limiter for requests without a usable key (401, 403 ip_not_allowed, admin auth failures). */
  anonymous(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  /** The anonymous limiter's headers for the address, without counting this request (admin answers). */
  anonymousHeadersOnly(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  /**
   * The anonymous limiter counted for an address, outside any request (answers the HTTP layer writes itself, on the
   * socket): its headers, and whether the address is over its limit.
   */
  anonymousHeaders(address: string): Promise<{ headers: Record<string, string>; allowed: boolean; resetMs: number }>;
}

declare module "fastify" {
  interface FastifyInstance {
    limits: Limits;
    /** False while the shared limiter (Redis) is unreachable. */
    limiterHealthy: () => boolean;
  }
}

/**
 * Headers go on with reply.header before anything can fail, so every response carries them, errors included; a
 * refused request is answered 429 with Retry-After and is not counted.
 */
export const rateLimitPlugin = fp(
  async (app, opts: { redisUrl: string | null; onError: "open" | "closed"; onStoreError?: () => void }) => {
    let store: RateLimitStore = new MemoryStore();
    if (opts.redisUrl) {
      const resilient = new ResilientStore(await RedisStore.connect(opts.redisUrl), opts.onError, app.log);
      if (opts.onStoreError) resilient.onFailure(opts.onStoreError);
      store = resilient;
    }
    app.decorate("limiterHealthy", () => !(store instanceof ResilientStore) || store.healthy);
    app.ctx.onClose(() => store.close());
    const anonymous = app.ctx.config.anonymousRateLimit;

    async function counted(bucket: string, limit: number, windowMs: number, count = true) {
      const result = await (count ? store.hit(bucket, limit, windowMs) : store.peek(bucket, limit, windowMs));
      const headers = {
        "x-ratelimit-limit-requests": String(limit),
        "x-ratelimit-remaining-requests": String(result.allowed ? Math.max(0, limit - result.count) : 0),
        "x-ratelimit-reset-requests": formatResetDuration(result.resetMs / 1000),
      };
      return { headers, allowed: result.allowed, resetMs: result.resetMs };
    }

    async function count(reply: FastifyReply, bucket: string, limit: number, windowMs: number): Promise<void> {
      const result = await counted(bucket, limit, windowMs);
      reply.headers(result.headers);
      if (!result.allowed) {
        throw new AppError("rate_limit_exceeded", {
          message: `Rate limit of ${limit} requests per ${formatResetDuration(windowMs / 1000)} exceeded. Retry after the time given in Retry-After.`,
          retryAfterMs: result.resetMs,
        });
      }
    }

    app.decorate("limits", {
      anonymous: (request, reply) => count(reply, `a:${request.clientIp}`, anonymous.requests, anonymous.windowMs),
      anonymousHeaders: (address) => counted(`a:${address}`, anonymous.requests, anonymous.windowMs),
      async anonymousHeadersOnly(request, reply) {
        reply.headers((await counted(`a:${request.clientIp}`, anonymous.requests, anonymous.windowMs, false)).headers);
      },
      async key(request, reply) {
        const auth = request.auth;
        if (!auth) return;
        await count(reply, `k:${auth.keyId}`, auth.plan.rateLimit.requests, auth.plan.rateLimit.windowMs);
      },
    } satisfies Limits);
  },
  { name: "limits" },
);
