import { Type, type Static } from "@sinclair/typebox";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import "@fastify/cookie";
import { OidcRefusal, type OidcTransaction } from "../../auth/oidc.ts";
import { AppError } from "../../errors/app-error.ts";
import { errorResponses } from "../../errors/error.schema.ts";
import { storeCall } from "../../auth/admin-auth.plugin.ts";
import { operatorSignIn } from "../../auth/oidc-operators.ts";
import { signIn } from "./console-sign-in.ts";

/**
 * The sign-in's state between the redirect and the way back, in the browser only (no replica needs to hold it):
 * HttpOnly and __Host-, SameSite=Lax because the way back is a navigation from the provider's site (a Strict cookie
 * would not be sent), ten minutes at most.
 */
const transactionCookie = "__Host-modelgate_oidc";
const transactionOptions = { httpOnly: true, secure: true, sameSite: "lax", path: "/" } as const;

const CallbackQuery = Type.Object(
  { code: Type.Optional(Type.String({ maxLength: 4096 })), state: Type.Optional(Type.String({ maxLength: 512 })), error: Type.Optional(Type.String({ maxLength: 512 })) },
  { additionalProperties: Type.String({ maxLength: 4096 }) },
);
const tags = ["console"];
// Browser navigations (redirects), not API calls: hidden from the OpenAPI document like the console's page.
const Redirect = Type.Null({ description: "A redirect (Location): to the identity provider, or back to the console" });

function redirectUri(request: FastifyRequest): string {
  const redirectUri = request.server.ctx.config.console.oidc?.redirectUri;
  if (redirectUri) return redirectUri;
  const origin = request.server.ctx.config.console.publicUrl ?? `https://${request.headers.host}`;
  return `${origin}/console/api/oidc/callback`;
}

/** Back to the console, with a message for the sign-in page when something was refused (in the fragment: never logged). */
function backToConsole(reply: FastifyReply, error: string | null = null): FastifyReply {
  return reply.redirect(error ? `/console#/signin?error=${encodeURIComponent(error)}` : "/console#/", 302);
}

/**
 * Operators' sign-in through OpenID Connect (console.oidc): start redirects to the provider; the callback checks
 * the answer (state, PKCE, the ID token's signature, issuer, audience and nonce: auth/oidc.ts), finds the operator
 * (by the provider's iss + sub once linked) and their role (auth/oidc-operators.ts), and signs in. A refusal goes back
 * to the sign-in page with its reason, audited; a role taken away at the provider ends the operator's sessions.
 */
export default async function consoleOidcRoutes(app: FastifyInstance): Promise<void> {
  const store = () => app.keyStore;

  app.get(
    "/console/api/oidc/start",
    { schema: { hide: true, operationId: "consoleOidcStart", tags, summary: "Operators: sign in through the identity provider (a redirect)", response: { 302: Redirect, ...errorResponses(404, 429, 503) } } },
    async (request, reply) => {
      if (!app.oidc) throw new AppError("model_not_found", { param: null, message: "Single sign-on is not configured on this server." });
      let started;
      try {
        started = await app.oidc.start(redirectUri(request));
      } catch (err) {
        request.log.warn({ err }, "the OpenID provider's discovery failed");
        throw new AppError("overloaded", { message: "The identity provider cannot be reached; retry shortly.", retryAfterMs: 5000 });
      }
      reply.setCookie(transactionCookie, Buffer.from(JSON.stringify(started.transaction)).toString("base64url"), { ...transactionOptions, maxAge: 600 });
      return reply.redirect(started.url, 302);
    },
  );

  app.get<{ Querystring: Static<typeof CallbackQuery> }>(
    "/console/api/oidc/callback",
    { schema: { hide: true, operationId: "consoleOidcCallback", tags, summary: "The identity provider's answer: signs the operator in and goes back to the console", querystring: CallbackQuery, response: { 302: Redirect, ...errorResponses(400, 404, 429, 503) } } },
    async (request, reply) => {
      if (!app.oidc) throw new AppError("model_not_found", { param: null, message: "Single sign-on is not configured on this server." });
      const transaction = readTransaction(request.cookies[transactionCookie]);
      reply.clearCookie(transactionCookie, transactionOptions);
      const refuse = async (email: string | null, reason: string, message: string) => {
        app.authAudit.failedSignIn(request.clientIp, email, reason);
        await app.limits.anonymous(request, reply);
        return backToConsole(reply, message);
      };
      if (!transaction) return refuse(null, "oidc: no sign-in under way", "The sign-in took too long or was started in another browser; try again.");
      if (request.query.error) return refuse(null, `oidc: provider answered ${request.query.error}`, "The identity provider refused the sign-in.");
      const callback = new URL(transaction.redirectUri);
      callback.search = new URL(request.url, "https://callback.invalid").search;
      let identity;
      try {
        identity = await app.oidc.finish(callback, transaction);
      } catch (err) {
        if (!(err instanceof OidcRefusal)) throw err;
        request.log.warn({ reason: err.message }, "an OpenID sign-in was refused");
        return refuse(null, `oidc: ${err.message}`, "The identity provider's answer could not be verified; try again.");
      }
      const outcome = await storeCall(() => operatorSignIn(store(), identity, app.oidc!.decidesRoles, request.clientIp));
      if (outcome.kind === "refused") {
        // A role taken away at the provider ends the sessions it opened, on every replica.
        if (outcome.endSessionsOf) await app.consoleSessions.deleteUser(outcome.endSessionsOf);
        return refuse(identity.email, outcome.reason, outcome.message);
      }
      // A changed role ends the sessions opened with the old one (a lower role holds at once everywhere).
      if (outcome.roleChanged) await app.consoleSessions.deleteUser(outcome.user.id);
      await signIn(request, reply, outcome.user, "oidc");
      return backToConsole(reply);
    },
  );
}

function readTransaction(cookie: string | undefined): OidcTransaction | null {
  if (!cookie || cookie.length > 2048) return null;
  try {
    const t = JSON.parse(Buffer.from(cookie, "base64url").toString("utf8")) as OidcTransaction;
    return typeof t.state === "string" && typeof t.nonce === "string" && typeof t.verifier === "string" && typeof t.redirectUri === "string" ? t : null;
  } catch {
    return null;
  }
}
