import type { FastifyReply, FastifyRequest } from "fastify";
import "@fastify/cookie";
import { consoleCookie, type ConsoleSession } from "../../auth/console-sessions.ts";
import { isOperatorRole, type User } from "../../auth/principal.ts";
import type { SessionAnswer } from "./console.schema.ts";

export const cookieOptions = { httpOnly: true, secure: true, sameSite: "strict", path: "/" } as const;

export async function sessionAnswer(request: FastifyRequest, user: User, session: ConsoleSession): Promise<SessionAnswer> {
  const account = user.accountId ? await request.server.keyStore.accounts.find(user.accountId) : null;
  return {
    csrfToken: session.csrf,
    expiresAt: new Date(session.expiresAt).toISOString(),
    idleTimeoutSeconds: Math.floor(request.server.consoleSessions.timeouts.idleMs / 1000),
    user: {
      id: user.id,
      email: user.email,
      kind: isOperatorRole(user.role) ? "operator" : "member",
      role: user.role,
      accountId: user.accountId,
      accountName: account?.name ?? null,
      totpEnabled: user.totpEnabled,
    },
  };
}

/**
 * Starts a session for `user`: always a new id (the one the browser brought, if any, is ended first, so an id
 * planted before sign-in never becomes a session: no fixation), audited as auth.login by the user.
 */
export async function signIn(request: FastifyRequest, reply: FastifyReply, user: User, method: string): Promise<SessionAnswer> {
  const app = request.server;
  const previous = request.cookies[consoleCookie];
  if (previous) await app.consoleSessions.delete(previous);
  await app.authAudit.login(request.clientIp, { id: user.id, email: user.email, accountId: user.accountId, operator: isOperatorRole(user.role) }, method);
  const { id, session } = await app.consoleSessions.create(user.id);
  reply.setCookie(consoleCookie, id, { ...cookieOptions, maxAge: Math.floor(app.consoleSessions.timeouts.lifetimeMs / 1000) });
  return sessionAnswer(request, user, session);
}
