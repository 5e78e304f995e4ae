import { Type, type Static } from "@sinclair/typebox";
import type { FastifyInstance, FastifyReply } from "fastify";
import "@fastify/cookie";
import { consoleCookie } from "../../auth/console-sessions.ts";
import { consoleLogin } from "../../auth/openapi-security.ts";
import { errorResponses } from "../../errors/error.schema.ts";
import { AppError } from "../../errors/app-error.ts";
import { authenticateAdmin, checkAdminToken } from "../../auth/admin-auth.plugin.ts";

const LoginBody = Type.Object({ token: Type.String({ minLength: 1, maxLength: 4096 }) }, { additionalProperties: false });
const SessionAnswer = Type.Object({
  csrfToken: Type.String({ description: "Send as X-CSRF-Token on every admin call that changes something" }),
  expiresAt: Type.String({ description: "ISO 8601; the cookie's own expiry" }),
});

const tags = ["console"];
const cookieOptions = { httpOnly: true, secure: true, sameSite: "strict", path: "/" } as const;

function setLoginCookie(reply: FastifyReply, id: string, maxAgeMs: number): void {
  reply.setCookie(consoleCookie, id, { ...cookieOptions, maxAge: Math.floor(maxAgeMs / 1000) });
}

/**
 * The console's login (spec §2.9): the admin token, once, for an HttpOnly, Secure, SameSite=Strict cookie. The
 * console then calls the admin API with that cookie (auth/admin-auth.plugin.ts), with the login's CSRF token on every
 * change.
 */
export default async function consoleLoginRoutes(app: FastifyInstance): Promise<void> {
  app.post<{ Body: Static<typeof LoginBody> }>(
    "/console/api/login",
    { schema: { operationId: "consoleLogin", tags, summary: "Log in with the admin token: sets the console cookie", body: LoginBody, response: { 200: SessionAnswer, ...errorResponses(400, 401, 413, 429) } } },
    async (request, reply) => {
      await checkAdminToken(request, reply, request.body.token);
      await app.authAudit.login(request.clientIp);
      // A login from a browser that still holds one replaces it, so no orphaned login outlives its tab.
      const previous = request.cookies[consoleCookie];
      if (previous) app.consoleSessions.delete(previous);
      const { id, session } = app.consoleSessions.create();
      setLoginCookie(reply, id, app.consoleSessions.ttlMs);
      return { csrfToken: session.csrf, expiresAt: new Date(session.expiresAt).toISOString() };
    },
  );

  app.get(
    "/console/api/session",
    { schema: { operationId: "consoleSession", tags, summary: "The console login's CSRF token, while the cookie is valid", security: [{ consoleCookie: [] }], response: { 200: SessionAnswer, ...errorResponses(401, 429) } } },
    async (request) => {
      const id = request.cookies[consoleCookie];
      const session = id ? app.consoleSessions.get(id) : null;
      // Not counted by the limiter: every first visit asks this before anyone has logged in.
      if (!session) throw new AppError("invalid_api_key", { message: "Not logged in to the console." });
      return { csrfToken: session.csrf, expiresAt: new Date(session.expiresAt).toISOString() };
    },
  );

  app.post(
    "/console/api/logout",
    {
      schema: { operationId: "consoleLogout", tags, summary: "End the console login (the cookie is refused afterwards)", security: [consoleLogin("POST")], response: { 200: Type.Object({ loggedOut: Type.Literal(true) }), ...errorResponses(401, 429) } },
      // The same check as any admin call with the cookie: a cross-site page cannot log the console out either.
      onRequest: authenticateAdmin,
    },
    async (request, reply) => {
      const id = request.cookies[consoleCookie];
      if (id) app.consoleSessions.delete(id);
      reply.clearCookie(consoleCookie, cookieOptions);
      return { loggedOut: true as const };
    },
  );
}
