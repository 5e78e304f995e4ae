import { Type, type Static } from "@sinclair/typebox";

export const SessionUser = Type.Object({
  id: Type.String(),
  email: Type.String(),
  kind: Type.Union([Type.Literal("member"), Type.Literal("operator")]),
  role: Type.String({ description: "owner, developer or viewer (members); operator-admin or operator-viewer" }),
  accountId: Type.Union([Type.String(), Type.Null()]),
  accountName: Type.Union([Type.String(), Type.Null()]),
  totpEnabled: Type.Boolean(),
});

export const SessionAnswer = Type.Object(
  {
    csrfToken: Type.String({ description: "Send as X-CSRF-Token on every call that changes something" }),
    expiresAt: Type.String({ description: "ISO 8601: the session's absolute end" }),
    idleTimeoutSeconds: Type.Integer({ description: "The session ends after this long without a request" }),
    user: SessionUser,
  },
  { $id: "ConsoleSession" },
);
export type SessionAnswer = Static<typeof SessionAnswer>;

/** The console's shared schemas (the OpenAPI document lists them). */
export const consoleSchemas = [SessionAnswer];
