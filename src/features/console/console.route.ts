import { readFileSync } from "node:fs";
import { Type, type Static } from "@sinclair/typebox";
import type { FastifyInstance, FastifyReply } from "fastify";
import fastifyStatic from "@fastify/static";
import "@fastify/cookie";
import { consoleCookie } from "../../auth/console-sessions.ts";
import { errorResponses } from "../../errors/error.schema.ts";
import { AppError } from "../../errors/app-error.ts";
import { authenticateAdmin, checkAdminToken } from "../../plugins/admin-auth.ts";
import { consoleDir, consolePage, vendorFiles } from "./console-files.ts";

const LoginBody = Type.Object({ token: Type.String({ minLength: 1, maxLength: 4096 }) }, { additionalProperties: false });
const SessionAnswer = Type.Object({ csrfToken: Type.String({ description: "Send as X-CSRF-Token on every admin call that changes something" }), expiresAt: Type.String() });

const tags = ["console"];
const pageHeaders = { "x-content-type-options": "nosniff", "referrer-policy": "no-referrer", "x-frame-options": "DENY" };

function setLoginCookie(reply: FastifyReply, id: string, maxAgeMs: number): void {
  reply.setCookie(consoleCookie, id, { httpOnly: true, secure: true, sameSite: "strict", path: "/", maxAge: Math.floor(maxAgeMs / 1000) });
}

/**
 * The web console (spec §2.9) on the HTTPS listener: the page and its files (static ES modules, no build step),
 * and the login that turns the admin token into an HttpOnly, Secure, SameSite=Strict cookie. The console then
 * calls the admin API with that cookie (plugins/admin-auth.ts), with the login's CSRF token on every change.
 */
export default async function consoleRoutes(app: FastifyInstance): Promise<void> {
  const page = consolePage();
  const vendor = Object.fromEntries(Object.entries(vendorFiles).map(([name, { file, type }]) => [name, { body: readFileSync(file), type }]));

  const sendPage = async (_request: unknown, reply: FastifyReply) =>
    reply.headers({ ...pageHeaders, "content-security-policy": page.csp, "cache-control": "no-store" }).type("text/html; charset=utf-8").send(page.html);
  app.get("/console", { schema: { hide: true } }, sendPage);
  app.get("/console/", { schema: { hide: true } }, sendPage);

  app.get<{ Params: { name: string } }>("/console/vendor/:name", { schema: { hide: true } }, async (request, reply) => {
    const file = vendor[request.params.name];
    if (!file) throw new AppError("model_not_found", { param: null, message: "Unknown console file." });
    return reply.headers({ ...pageHeaders, "cache-control": "public, max-age=3600" }).type(`${file.type}; charset=utf-8`).send(file.body);
  });

  await app.register(fastifyStatic, {
    root: consoleDir,
    prefix: "/console/assets/",
    decorateReply: false,
    index: false,
    list: false,
    schemaHide: true,
    cacheControl: true,
    maxAge: 0,
    setHeaders: (res) => {
      for (const [name, value] of Object.entries(pageHeaders)) res.raw.setHeader(name, value);
    },
  });

  app.post<{ Body: Static<typeof LoginBody> }>(
    "/console/api/login",
    { schema: { operationId: "consoleLogin", tags, summary: "Log in with the admin token: sets the console cookie", body: LoginBody, response: { 200: SessionAnswer, ...errorResponses(400, 401, 429) } } },
    async (request, reply) => {
      await checkAdminToken(request, reply, request.body.token);
      const { id, session } = app.consoleSessions.create();
      setLoginCookie(reply, id, app.consoleSessions.ttlMs);
      return { csrfToken: session.csrf, expiresAt: new Date(session.expiresAt).toISOString() };
    },
  );

  app.get(
    "/console/api/session",
    { schema: { operationId: "consoleSession", tags, summary: "The console login's CSRF token, while the cookie is valid", response: { 200: SessionAnswer, ...errorResponses(401, 429) } } },
    async (request, reply) => {
      const id = request.cookies[consoleCookie];
      const session = id ? app.consoleSessions.get(id) : null;
      if (!session) {
        await app.limits.anonymousHeadersOnly(request, reply);
        throw new AppError("invalid_api_key", { message: "Not logged in to the console." });
      }
      return { csrfToken: session.csrf, expiresAt: new Date(session.expiresAt).toISOString() };
    },
  );

  app.post(
    "/console/api/logout",
    {
      schema: { operationId: "consoleLogout", tags, summary: "End the console login (the cookie is refused afterwards)", response: { 200: Type.Object({ loggedOut: Type.Literal(true) }), ...errorResponses(401, 429) } },
      // The same check as any admin call with the cookie: a cross-site page cannot log the console out either.
      onRequest: authenticateAdmin,
    },
    async (request, reply) => {
      const id = request.cookies[consoleCookie];
      if (id) app.consoleSessions.delete(id);
      reply.clearCookie(consoleCookie, { httpOnly: true, secure: true, sameSite: "strict", path: "/" });
      return { loggedOut: true as const };
    },
  );
}
