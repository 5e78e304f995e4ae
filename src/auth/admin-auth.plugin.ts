import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { AppError } from "../errors/app-error.ts";
import { bearerToken } from "./bearer.ts";
import "@fastify/cookie";
import { ConsoleSessions, DatabaseSessions, RedisSessions, consoleCookie, csrfMatches, type ConsoleSession } from "./console-sessions.ts";
import { checkAccess, type MemberAccess } from "./access.ts";
import { principalOf, type Principal } from "./principal.ts";
import { OidcSignIn } from "./oidc.ts";
import type { Store } from "../store/store.ts";
import { isStoreBusy, isStoreUnreachable } from "../store/store-health.ts";
import type { TokenSurface } from "./auth-audit.ts";
import "./api-key.plugin.ts";

declare module "fastify" {
  interface FastifyInstance {
    /** Console sessions: in the database, or in Redis when configured (every replica sees them). */
    consoleSessions: ConsoleSessions;
    /** Operators' single sign-on, when `console.oidc` is configured. */
    oidc: OidcSignIn | null;
  }
  interface FastifyRequest {
    /** Who an admin or console call comes from (set by the admin scope's auth hook): the admin token or a console user. */
    principal: Principal | null;
    /** The console session the call came with (its cookie id and state), when it came with one. */
    consoleSession: { id: string; session: ConsoleSession } | null;
  }
  interface FastifyContextConfig {
    /** Admin routes: what members may do with it (auth/access.ts); absent, the route is for operators only. */
    access?: MemberAccess;
  }
}

/** The console's sessions and single sign-on, and `request.principal`, which the hooks below fill in. */
export const adminAuthPlugin = fp(
  async (app, opts: { store: Store }) => {
    const { config } = app.ctx;
    const timeouts = { idleMs: config.console.sessionIdleMs, lifetimeMs: config.console.sessionLifetimeMs };
    const backend = config.redisUrl ? await RedisSessions.connect(config.redisUrl, config.deployment) : new DatabaseSessions(opts.store.sessions, timeouts);
    const sessions = new ConsoleSessions(backend, timeouts);
    app.ctx.onClose(() => sessions.close());
    app.decorate("consoleSessions", sessions);
    app.decorate("oidc", config.console.oidc ? new OidcSignIn(config.console.oidc) : null);
    app.decorateRequest("principal", null);
    app.decorateRequest("consoleSession", null);
  },
  { name: "admin-auth" },
);

function digest(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

/**
 * The admin scope's first hook (/admin/v1). Who calls: the admin token (automation and bootstrapping the first
 * operator) from config `adminToken`, sent as `Authorization: Bearer <token>` or `x-admin-token`, never an API key;
 * or a console session (an operator or a member, auth/principal.ts). Then the route's `config.access` decides what
 * the caller's role may do (auth/access.ts); the route checks the account. Every token attempt is counted by the
 * per-address anonymous limiter before the token is compared (checkToken); every admin answer carries its headers.
 */
export async function authenticateAdmin(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const sessionId = request.cookies?.[consoleCookie];
  const sentToken = request.headers.authorization !== undefined || request.headers["x-admin-token"] !== undefined;
  if (sessionId && !sentToken) {
    await authenticateSession(request, reply);
  } else {
    await authenticateToken(request, reply, [request.server.ctx.config.adminToken], "admin", "The admin API is disabled: no adminToken is configured.");
    request.principal = { kind: "admin-token" };
  }
  checkAccess(request.principal!, request.method, request.routeOptions.config?.access);
}

const safeMethods = new Set(["GET", "HEAD", "OPTIONS"]);

/** Whether an Origin header, when the browser sent one, is this server's own (a cross-site page's is not). */
export function sameOrigin(request: FastifyRequest): boolean {
  const origin = request.headers.origin;
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === request.headers.host;
  } catch {
    return false;
  }
}

/**
 * A console session from its cookie: valid while it lasts (idle and absolute timeouts), its user still active; every
 * call that changes something must carry the session's X-CSRF-Token (a cross-site page cannot read it) and come from
 * this origin. Refusals count against the per-address limiter like a wrong token. Sets `request.principal` and
 * `request.consoleSession`.
 */
export async function authenticateSession(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const app = request.server;
  const id = request.cookies?.[consoleCookie];
  const refuse = async (message: string): Promise<never> => {
    await app.limits.anonymous(request, reply);
    throw new AppError("invalid_api_key", { message });
  };
  if (!id) return refuse("Not signed in to the console.");
  const session = await storeCall(() => app.consoleSessions.get(id));
  if (!session) return refuse("The console session has ended; sign in again.");
  if (!safeMethods.has(request.method) && (!csrfMatches(request.headers["x-csrf-token"], session) || !sameOrigin(request))) {
    return refuse("A console call that changes something needs the X-CSRF-Token of its session, from the console's own origin.");
  }
  const user = await storeCall(() => app.keyStore.users.get(session.userId));
  if (!user || user.disabledAt) {
    await app.consoleSessions.delete(id);
    return refuse("This console user was removed.");
  }
  request.principal = principalOf(user);
  request.consoleSession = { id, session };
  await app.limits.anonymousHeadersOnly(request, reply);
}

/** A database or Redis that is away is a 503 to retry, never a sign-out. */
export async function storeCall<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (isStoreUnreachable(err) || isStoreBusy(err) || (err as Error).name === "MaxRetriesPerRequestError" || /Connection is closed|timed out/i.test((err as Error).message)) {
      throw new AppError("overloaded", { message: "The session store is unreachable; retry shortly.", retryAfterMs: 2000 });
    }
    throw err;
  }
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
