import { Type, type Static } from "@sinclair/typebox";

const Timestamp = Type.String({ description: "ISO 8601" });

export const UserSchema = Type.Object(
  {
    id: Type.String(),
    email: Type.String(),
    accountId: Type.Union([Type.String(), Type.Null()], { description: "The member's account; null for an operator" }),
    role: Type.String({ description: "owner, developer, viewer; operator-admin, operator-viewer" }),
    totpEnabled: Type.Boolean(),
    createdAt: Timestamp,
  },
  { $id: "ConsoleUser" },
);

export const InviteSchema = Type.Object(
  {
    id: Type.String(),
    email: Type.String(),
    role: Type.String(),
    accountId: Type.Union([Type.String(), Type.Null()]),
    expiresAt: Timestamp,
    createdByEmail: Type.Union([Type.String(), Type.Null()]),
  },
  { $id: "PendingInvite" },
);

export const ResetLinkSchema = Type.Object(
  {
    id: Type.String({ description: "Withdraw it with DELETE /admin/v1/invites/{id}" }),
    userId: Type.String({ description: "The user it opens (and no other, whatever their email becomes)" }),
    email: Type.String(),
    expiresAt: Timestamp,
    createdByEmail: Type.Union([Type.String(), Type.Null()]),
    clearsTotp: Type.Boolean({ description: "Accepting it also turns the user's TOTP off (an operator's reset)" }),
  },
  { $id: "PendingResetLink" },
);

export const UserList = Type.Object(
  {
    object: Type.Literal("list"),
    data: Type.Array(Type.Ref(UserSchema)),
    invites: Type.Array(Type.Ref(InviteSchema), { description: "Unused, unexpired invites" }),
    resetLinks: Type.Array(Type.Ref(ResetLinkSchema), { description: "Unused, unexpired password-reset links" }),
  },
  { $id: "ConsoleUserList" },
);

export const ResetLinkBody = Type.Union(
  [
    Type.Object(
      { clearTotp: Type.Optional(Type.Boolean({ description: "Accepting the link also turns the user's TOTP off (operators only; audited). Without it, a user with TOTP on gives a code to accept it." })) },
      { additionalProperties: false },
    ),
    Type.Null(),
  ],
  { description: "Optional" },
);
export type ResetLinkBody = Static<typeof ResetLinkBody>;

export const CreatedLinkSchema = Type.Object(
  {
    id: Type.String(),
    email: Type.String(),
    role: Type.String(),
    accountId: Type.Union([Type.String(), Type.Null()]),
    purpose: Type.Union([Type.Literal("invite"), Type.Literal("reset")]),
    expiresAt: Timestamp,
    token: Type.String({ description: "Shown in this answer only: the store keeps its hash" }),
    path: Type.String({ description: "The console page that takes the token: /console#/invite/<token>" }),
    url: Type.Union([Type.String(), Type.Null()], { description: "The full link, when console.publicUrl is configured" }),
  },
  { $id: "OneTimeLink" },
);

export const InviteBody = Type.Object(
  { email: Type.String({ minLength: 3, maxLength: 320 }), role: Type.String({ minLength: 1, maxLength: 32 }) },
  { additionalProperties: false },
);
export type InviteBody = Static<typeof InviteBody>;

export const RoleBody = Type.Object({ role: Type.String({ minLength: 1, maxLength: 32 }) }, { additionalProperties: false });
export type RoleBody = Static<typeof RoleBody>;

export const IdParams = Type.Object({ id: Type.String({ maxLength: 128 }) });
export type IdParams = Static<typeof IdParams>;

const Limit = Type.Object({ requests: Type.Integer(), windowSeconds: Type.Number() });
const TokenLimit = Type.Object({ tokens: Type.Integer(), windowSeconds: Type.Number() });
const Period = Type.Union([Type.Literal("day"), Type.Literal("month")]);

export const PlanLimitsSchema = Type.Object(
  {
    name: Type.String(),
    rateLimit: Limit,
    accountRateLimit: Limit,
    maxBodyBytes: Type.Integer(),
    maxUploadBytes: Type.Integer(),
    maxOutputTokens: Type.Union([Type.Integer(), Type.Null()]),
    models: Type.Array(Type.String(), { description: "Model globs the plan allows" }),
    endpoints: Type.Array(Type.String()),
    ipAllowlist: Type.Boolean(),
    tokenLimit: Type.Union([TokenLimit, Type.Null()], { description: "Tokens per window for each key (issue 32)" }),
    accountTokenLimit: Type.Union([TokenLimit, Type.Null()], { description: "Tokens per window for all the account's keys together" }),
    tokenQuota: Type.Union(
      [
        Type.Object({
          tokens: Type.Integer(),
          period: Period,
          used: Type.Integer({ description: "Recorded in the current UTC period" }),
          left: Type.Integer(),
          resetsAt: Type.String({ description: "ISO 8601, 00:00 UTC" }),
        }),
        Type.Null(),
      ],
      { description: "The plan's token quota and what is used of it (issue 32); null: none" },
    ),
    budget: Type.Union(
      [
        Type.Object({
          amount: Type.String({ description: "Decimal, 6 places" }),
          amountMicros: Type.Integer(),
          period: Period,
          spent: Type.String(),
          spentMicros: Type.Integer(),
          left: Type.String(),
          leftMicros: Type.Integer(),
          currency: Type.String(),
          resetsAt: Type.String(),
          source: Type.Union([Type.Literal("plan"), Type.Literal("account")], { description: "account: the account's own budget; plan: its plan's" }),
        }),
        Type.Null(),
      ],
      { description: "The account's budget and spend (issue 32); null: none" },
    ),
  },
  { $id: "PlanLimits" },
);

/** The console users' shared schemas (the OpenAPI document lists them). */
export const membersSchemas = [UserSchema, InviteSchema, ResetLinkSchema, UserList, CreatedLinkSchema, PlanLimitsSchema];
