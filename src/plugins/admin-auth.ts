import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import { AppError } from "../errors/app-error.ts";
import { bearerToken } from "../http/bearer.ts";
import "../http/fastify-types.ts";

function digest(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

/**
 * The admin scope's first hook (/admin/v1). The admin token comes from config `adminToken`, sent as
 * `Authorization: Bearer <token>` or `x-admin-token`; it is never an API key, and the /v1 scope never accepts it.
 * With no adminToken configured the admin API is off: every call is 401. A refusal is counted by the per-address
 * anonymous limiter first, so guessing the token is rate limited like guessing keys; every admin answer carries
 * that limiter's headers.
 */
export function authenticateAdmin(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  return authenticateToken(request, reply, [request.server.ctx.config.adminToken], "The admin API is disabled: no adminToken is configured.");
}

/** GET /metrics: the admin token, or the scrapers' own `metrics.token` (which opens nothing else). */
export function authenticateMetrics(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const { adminToken, metricsToken } = request.server.ctx.config;
  return authenticateToken(request, reply, [adminToken, metricsToken], "Metrics are disabled: configure adminToken or metrics.token.");
}

async function authenticateToken(request: FastifyRequest, reply: FastifyReply, accepted: (string | null)[], disabled: string): Promise<void> {
  const tokens = accepted.filter((t): t is string => t !== null);
  const refuse = async (message: string): Promise<never> => {
    await request.server.limits.anonymous(request, reply);
    throw new AppError("invalid_api_key", { message });
  };
  if (tokens.length === 0) return refuse(disabled);
  const alt = request.headers["x-admin-token"];
  const given = bearerToken(request.headers.authorization) ?? (typeof alt === "string" ? alt : null);
  // Compare digests so the comparison time says nothing about the token's length or content.
  if (!given || !tokens.some((t) => timingSafeEqual(digest(given), digest(t)))) return refuse("Invalid token.");
  // Accepted calls are not counted, but carry the limiter's headers like every other answer (§8).
  await request.server.limits.anonymousHeadersOnly(request, reply);
}
