import { Type, type Static } from "@sinclair/typebox";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import "@fastify/cookie";
import { consoleCookie } from "../../auth/console-sessions.ts";
import { verifyPassword, maxPasswordLength } from "../../auth/password.ts";
import { checkSecondFactor } from "../../auth/second-factor.ts";
import { acceptInvite, resetTarget, usableInvite, type SecondFactorCheck } from "../../auth/console-users.ts";
import { errorResponses } from "../../errors/error.schema.ts";
import { AppError } from "../../errors/app-error.ts";
import { LifecycleError } from "../../keys/lifecycle.ts";
import { authenticateSession, sameOrigin, storeCall } from "../../auth/admin-auth.plugin.ts";
import { consoleLogin } from "../../auth/openapi-security.ts";
import { isOperatorRole, normalizeEmail } from "../../auth/principal.ts";
import { cookieOptions, sessionAnswer, signIn } from "./console-sign-in.ts";
import { SessionAnswer } from "./console.schema.ts";

const LoginBody = Type.Object(
  {
    email: Type.String({ minLength: 3, maxLength: 320 }),
    password: Type.String({ minLength: 1, maxLength: maxPasswordLength }),
    code: Type.Optional(Type.String({ maxLength: 32, description: "The authenticator's 6-digit code, or a recovery code, when TOTP is on" })),
  },
  { additionalProperties: false },
);
const TokenBody = Type.Object({ token: Type.String({ minLength: 1, maxLength: 128 }) }, { additionalProperties: false });
const AcceptBody = Type.Object(
  {
    token: Type.String({ minLength: 1, maxLength: 128 }),
    password: Type.String({ minLength: 1, maxLength: maxPasswordLength }),
    code: Type.Optional(Type.String({ maxLength: 32, description: "A reset for a user with TOTP on: their authenticator's code, or a recovery code" })),
  },
  { additionalProperties: false },
);
const InviteView = Type.Object({
  email: Type.String(),
  role: Type.String(),
  purpose: Type.Union([Type.Literal("invite"), Type.Literal("reset")]),
  accountName: Type.Union([Type.String(), Type.Null()]),
  expiresAt: Type.String(),
  secondFactor: Type.Boolean({ description: "Accepting asks for the user's TOTP code or a recovery code (a reset for a user with TOTP on)" }),
});
const SignInOptions = Type.Object({
  passwords: Type.Literal(true),
  sso: Type.Boolean({ description: "Operators sign in through OpenID Connect (GET /console/api/oidc/start)" }),
});

const tags = ["console"];
const ssoOperators = "Operators sign in through single sign-on on this server: there is no password to reset.";
const deadLink = "This link is not valid: it was used, it expired (links last 72 hours), or it was withdrawn. Ask for a new one.";
const session = { schema: { tags }, onRequest: authenticateSession } as const;

/**
 * A sign-in posted by another site's page is refused (login CSRF: a victim signed in to the attacker's user). Its
 * JSON body already needs a CORS preflight no other origin passes; this says so outright.
 */
async function refuseCrossOrigin(request: FastifyRequest): Promise<void> {
  if (!sameOrigin(request)) throw new AppError("invalid_api_key", { message: "A sign-in must come from the console's own origin." });
}

/**
 * The console's sign-in (spec §2.9): members and local operators by email and password (and TOTP when on), an
 * invite or reset link to set a password, the session's CSRF token, sign-out here or everywhere. Operators with
 * OIDC configured sign in through console-oidc.route.ts. Sessions: auth/console-sessions.ts.
 */
export default async function consoleSessionRoutes(app: FastifyInstance): Promise<void> {
  const store = () => app.keyStore;

  /**
   * The link's invite, and a reset's user (the one it was made for, still active with the email it was sent to). A
   * dead link is a 404 counted like a guessed key; an operator's reset on a server with single sign-on is refused
   * (operators have no password there, and a reset would sign them in around the provider).
   */
  async function openLink(request: FastifyRequest<{ Body: { token: string } }>, reply: FastifyReply) {
    const invite = await storeCall(() => usableInvite(store(), request.body.token));
    const target = invite?.purpose === "reset" ? await storeCall(() => resetTarget(store(), invite)) : null;
    if (!invite || (invite.purpose === "reset" && !target)) {
      await app.limits.anonymous(request, reply);
      throw new AppError("model_not_found", { param: "token", message: deadLink });
    }
    if (target && app.oidc && isOperatorRole(target.role)) throw new AppError("invalid_parameter", { param: "token", message: ssoOperators });
    return { invite, target };
  }

  app.get(
    "/console/api/sign-in",
    { schema: { operationId: "consoleSignInOptions", tags, summary: "How to sign in on this server", response: { 200: SignInOptions, ...errorResponses(429) } } },
    async () => ({ passwords: true as const, sso: app.oidc !== null }),
  );

  app.post<{ Body: Static<typeof LoginBody> }>(
    "/console/api/login",
    { onRequest: refuseCrossOrigin, schema: { operationId: "consoleLogin", tags, summary: "Sign in with email and password (and TOTP code): sets the session cookie", body: LoginBody, response: { 200: Type.Ref(SessionAnswer), ...errorResponses(400, 401, 413, 429, 503) } } },
    async (request, reply) => {
      const email = normalizeEmail(request.body.email);
      const source = request.clientIp;
      // Counted before the password is checked: per address, and per email from every address.
      const attempt = await app.limits.signInAttempt(request, reply, email);
      const user = await storeCall(() => store().users.byEmail(email));
      const active = user && !user.disabledAt ? user : null;
      const hash = active ? await storeCall(() => store().users.passwordHash(active.id)) : null;
      const refuse = (reason: string, param: string | null = null, message = "Wrong email or password."): never => {
        app.authAudit.failedSignIn(source, email, reason);
        throw new AppError("invalid_api_key", { param, message });
      };
      if (!(await verifyPassword(request.body.password, hash)) || !active) return refuse(active ? "wrong password" : "unknown email");
      if (isOperatorRole(active.role) && app.oidc) return refuse("operators sign in through SSO", null, "Operators sign in through single sign-on on this server.");
      let method = "password";
      if (active.totpEnabled) {
        const code = request.body.code?.trim();
        // The password was right: the form asks for the second factor (not audited: the attempt is not over).
        if (!code) throw new AppError("invalid_api_key", { param: "code", message: "Enter the code from your authenticator app, or a recovery code." });
        const factor = await storeCall(() => checkSecondFactor(store(), active, code));
        if (!factor) return refuse("wrong second factor", "code", "Wrong or already used code.");
        method = factor === "totp" ? "password+totp" : "password+recovery-code";
      }
      await attempt.accepted();
      return signIn(request, reply, active, method);
    },
  );

  app.get(
    "/console/api/session",
    { schema: { operationId: "consoleSession", tags, summary: "The session's user and CSRF token, while the cookie is valid", security: [{ consoleCookie: [] }], response: { 200: Type.Ref(SessionAnswer), ...errorResponses(401, 429, 503) } } },
    async (request) => {
      const id = request.cookies[consoleCookie];
      const current = id ? await storeCall(() => app.consoleSessions.get(id)) : null;
      const user = current ? await storeCall(() => store().users.get(current.userId)) : null;
      // Not counted by the limiter: every first visit asks this before anyone has signed in.
      if (!current || !user || user.disabledAt) throw new AppError("invalid_api_key", { message: "Not signed in to the console." });
      return sessionAnswer(request, user, current);
    },
  );

  app.post(
    "/console/api/logout",
    { ...session, schema: { operationId: "consoleLogout", tags, summary: "End this session (its cookie is refused afterwards, on every replica)", security: [consoleLogin("POST")], response: { 200: Type.Object({ loggedOut: Type.Literal(true) }), ...errorResponses(401, 429, 503) } } },
    async (request, reply) => {
      await app.consoleSessions.delete(request.consoleSession!.id);
      reply.clearCookie(consoleCookie, cookieOptions);
      return { loggedOut: true as const };
    },
  );

  app.post(
    "/console/api/logout-everywhere",
    { ...session, schema: { operationId: "consoleLogoutEverywhere", tags, summary: "End every session of this user, in every browser", security: [consoleLogin("POST")], response: { 200: Type.Object({ loggedOut: Type.Literal(true) }), ...errorResponses(401, 429, 503) } } },
    async (request, reply) => {
      await app.consoleSessions.deleteUser(request.consoleSession!.session.userId);
      reply.clearCookie(consoleCookie, cookieOptions);
      return { loggedOut: true as const };
    },
  );

  app.post<{ Body: Static<typeof TokenBody> }>(
    "/console/api/invites/lookup",
    { schema: { operationId: "consoleInviteLookup", tags, summary: "What an invite or reset link is for, while it is usable", body: TokenBody, response: { 200: InviteView, ...errorResponses(400, 404, 413, 429, 503) } } },
    async (request, reply) => {
      const { invite, target } = await openLink(request, reply);
      const account = invite.accountId ? await store().accounts.find(invite.accountId) : null;
      const secondFactor = target !== null && target.totpEnabled && !invite.clearsTotp;
      return { email: invite.email, role: invite.role, purpose: invite.purpose, accountName: account?.name ?? null, expiresAt: invite.expiresAt, secondFactor };
    },
  );

  app.post<{ Body: Static<typeof AcceptBody> }>(
    "/console/api/invites/accept",
    { onRequest: refuseCrossOrigin, schema: { operationId: "consoleInviteAccept", tags, summary: "Use an invite or reset link: set the password (and give the TOTP code for a reset of a user with TOTP on) and sign in", body: AcceptBody, response: { 200: Type.Ref(SessionAnswer), ...errorResponses(400, 401, 404, 413, 429, 503) } } },
    async (request, reply) => {
      await openLink(request, reply);
      // A reset for a user with TOTP on: the code counts like a sign-in's (per address and per email), and a wrong
      // one leaves the link unused.
      const secondFactor: SecondFactorCheck = async (user) => {
        const attempt = await app.limits.signInAttempt(request, reply, user.email);
        const code = request.body.code?.trim();
        if (!code) throw new AppError("invalid_api_key", { param: "code", message: "Two-factor sign-in is on for this user: enter the code from the authenticator app, or a recovery code." });
        const factor = await storeCall(() => checkSecondFactor(store(), user, code));
        if (!factor) {
          app.authAudit.failedSignIn(request.clientIp, user.email, "wrong second factor (password reset)");
          throw new AppError("invalid_api_key", { param: "code", message: "Wrong or already used code." });
        }
        await attempt.accepted();
        return factor === "totp" ? "totp" : "recovery-code";
      };
      let accepted;
      try {
        accepted = await storeCall(() => acceptInvite(store(), request.body.token, request.body.password, request.clientIp, secondFactor));
      } catch (err) {
        if (err instanceof LifecycleError) throw new AppError("invalid_parameter", { param: err.param, message: err.message });
        throw err;
      }
      if (!accepted) {
        await app.limits.anonymous(request, reply);
        throw new AppError("model_not_found", { param: "token", message: deadLink });
      }
      // A new password ends every session the old one opened.
      await app.consoleSessions.deleteUser(accepted.user.id);
      return signIn(request, reply, accepted.user, accepted.method);
    },
  );
}
