import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { AppError } from "../errors/app-error.ts";
import { bearerToken } from "./bearer.ts";
import "@fastify/cookie";
import { ConsoleSessions, consoleCookie, csrfMatches } from "./console-sessions.ts";
import type { TokenSurface } from "./auth-audit.ts";
import "./api-key.plugin.ts";

declare module "fastify" {
  interface FastifyInstance {
    /** The console's logins, in this process's memory. */
    consoleSessions: ConsoleSessions;
  }
  interface FastifyRequest {
    /** Who an admin call comes from (set by the admin scope's auth hook): a console login or the admin token. */
    adminActor: "console" | "admin-token" | null;
  }
}

/** The console's logins and `request.adminActor`, which the hooks below fill in. */
export const adminAuthPlugin = fp(
  async (app) => {
    app.decorate("consoleSessions", new ConsoleSessions());
    app.decorateRequest("adminActor", null);
  },
  { name: "admin-auth" },
);

function digest(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

/**
 * The admin scope's first hook (/admin/v1). The admin token comes from config `adminToken`, sent as
 * `Authorization: Bearer <token>` or `x-admin-token`; it is never an API key, and the /v1 scope never accepts it.
 * With no adminToken configured the admin API is off: every call is 401. Every token attempt is counted by the
 * per-address anonymous limiter before the token is compared (checkToken), so guessing the token is rate limited
 * like guessing keys; every admin answer carries that limiter's headers.
 */
export async function authenticateAdmin(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const sessionId = request.cookies?.[consoleCookie];
  const sentToken = request.headers.authorization !== undefined || request.headers["x-admin-token"] !== undefined;
  if (sessionId && !sentToken) return authenticateConsole(request, reply, sessionId);
  await authenticateToken(request, reply, [request.server.ctx.config.adminToken], "admin", "The admin API is disabled: no adminToken is configured.");
  request.adminActor = "admin-token";
}

const safeMethods = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * The console's login cookie instead of the token: valid while its session lasts, and every call that changes
 * something must carry the session's X-CSRF-Token (a cross-site form cannot read it). Refusals count against the
 * per-address limiter like a wrong token.
 */
async function authenticateConsole(request: FastifyRequest, reply: FastifyReply, sessionId: string): Promise<void> {
  const session = request.server.consoleSessions.get(sessionId);
  const refuse = async (message: string): Promise<never> => {
    await request.server.limits.anonymous(request, reply);
    throw new AppError("invalid_api_key", { message });
  };
  if (!session) return refuse("The console login has ended; log in again.");
  if (!safeMethods.has(request.method) && !csrfMatches(request.headers["x-csrf-token"], session)) {
    return refuse("A console call that changes something needs the X-CSRF-Token of its login.");
  }
  request.adminActor = "console";
  await request.server.limits.anonymousHeadersOnly(request, reply);
}

/** The console's login: the admin token, checked and rate limited exactly as on the admin API. */
export function checkAdminToken(request: FastifyRequest, reply: FastifyReply, token: string): Promise<void> {
  return checkToken(request, reply, token, [request.server.ctx.config.adminToken], "console", "The console is disabled: no adminToken is configured.");
}

/** GET /metrics: the admin token, or the scrapers' own `metrics.token` (which opens nothing else). */
export function authenticateMetrics(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const { adminToken, metricsToken } = request.server.ctx.config;
  return authenticateToken(request, reply, [adminToken, metricsToken], "metrics", "Metrics are disabled: configure adminToken or metrics.token.");
}

async function authenticateToken(request: FastifyRequest, reply: FastifyReply, accepted: (string | null)[], surface: TokenSurface, disabled: string): Promise<void> {
  const alt = request.headers["x-admin-token"];
  const given = bearerToken(request.headers.authorization) ?? (typeof alt === "string" ? alt : null);
  return checkToken(request, reply, given, accepted, surface, disabled);
}

/**
 * The attempt is counted (per address, and in the budget of failures from all addresses) before the token is
 * compared: past either limit the answer is 429 whatever the token, the right one included, until the window ends,
 * so a guesser learns nothing more. A right token is then not counted after all. A wrong one is audited
 * (`auth.failed`, at most once per address per minute).
 */
async function checkToken(request: FastifyRequest, reply: FastifyReply, given: string | null, accepted: (string | null)[], surface: TokenSurface, disabled: string): Promise<void> {
  const tokens = accepted.filter((t): t is string => t !== null);
  if (tokens.length === 0) {
    await request.server.limits.anonymous(request, reply);
    throw new AppError("invalid_api_key", { message: disabled });
  }
  const attempt = await request.server.limits.anonymousAttempt(request, reply, "admin-token");
  // Compare digests so the comparison time says nothing about the token's length or content.
  if (!given || !tokens.some((t) => timingSafeEqual(digest(given), digest(t)))) {
    request.server.authAudit.failed(request.clientIp, surface);
    throw new AppError("invalid_api_key", { message: "Invalid token." });
  }
  // Accepted calls are not counted, but carry the limiter's headers like every other answer (§8).
  await attempt.accepted();
}
