import { Type, type Static } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { verifyPassword, maxPasswordLength } from "../../auth/password.ts";
import { disableTotp, enableTotp, startTotp } from "../../auth/second-factor.ts";
import { errorResponses } from "../../errors/error.schema.ts";
import { AppError } from "../../errors/app-error.ts";
import { authenticateSession, storeCall } from "../../auth/admin-auth.plugin.ts";
import { consoleLogin } from "../../auth/openapi-security.ts";
import type { User } from "../../auth/principal.ts";

const CodeBody = Type.Object({ code: Type.String({ minLength: 1, maxLength: 32 }) }, { additionalProperties: false });
const PasswordBody = Type.Object({ password: Type.String({ minLength: 1, maxLength: maxPasswordLength }) }, { additionalProperties: false });
const tags = ["console"];
const errors = errorResponses(400, 401, 413, 429, 503);

/** The signed-in user's own second factor: TOTP (RFC 6238) set up with a code, recovery codes shown once. */
export default async function consoleTotpRoutes(app: FastifyInstance): Promise<void> {
  const store = () => app.keyStore;
  app.addHook("onRequest", authenticateSession);
  const userOf = (request: { principal: { kind: string; user?: User } | null }): User => (request.principal as { user: User }).user;

  app.post(
    "/console/api/totp/setup",
    {
      schema: {
        operationId: "consoleTotpSetup",
        tags,
        security: [consoleLogin("POST")],
        summary: "Start turning TOTP on: a new secret for the authenticator app",
        response: { 200: Type.Object({ secret: Type.String({ description: "Base32; type it into the app, or use the URI" }), uri: Type.String({ description: "otpauth:// URI" }) }), ...errors },
      },
    },
    async (request) => storeCall(() => startTotp(store(), userOf(request), "Modelgate")),
  );

  app.post<{ Body: Static<typeof CodeBody> }>(
    "/console/api/totp/enable",
    {
      schema: {
        operationId: "consoleTotpEnable",
        tags,
        security: [consoleLogin("POST")],
        summary: "Finish turning TOTP on with a code from the app: answers the recovery codes, shown this once",
        body: CodeBody,
        response: { 200: Type.Object({ recoveryCodes: Type.Array(Type.String(), { description: "Each works once instead of a code; stored only as hashes" }) }), ...errors },
      },
    },
    async (request) => ({ recoveryCodes: await storeCall(() => enableTotp(store(), userOf(request), request.body.code, request.clientIp)) }),
  );

  app.post<{ Body: Static<typeof PasswordBody> }>(
    "/console/api/totp/disable",
    { schema: { operationId: "consoleTotpDisable", tags, security: [consoleLogin("POST")], summary: "Turn TOTP off (needs the password)", body: PasswordBody, response: { 200: Type.Object({ totpEnabled: Type.Literal(false) }), ...errors } } },
    async (request, reply) => {
      const user = userOf(request);
      const attempt = await app.limits.signInAttempt(request, reply, user.email);
      if (!(await verifyPassword(request.body.password, await storeCall(() => store().users.passwordHash(user.id))))) {
        app.authAudit.failedSignIn(request.clientIp, user.email, "wrong password (turning TOTP off)");
        throw new AppError("invalid_parameter", { param: "password", message: "Wrong password." });
      }
      await attempt.accepted();
      await storeCall(() => disableTotp(store(), user, request.clientIp));
      return { totpEnabled: false as const };
    },
  );
}
