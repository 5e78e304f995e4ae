import { Type, type Static, type TSchema } from "@sinclair/typebox";
import { Endpoint } from "../../config/config.schema.ts";
import { auditActors } from "../../auth/principal.ts";

const Actor = Type.Union(auditActors.map((a) => Type.Literal(a)), {
  description: "member or operator (a console user, named by actorId and actorEmail), cli, admin-token, anonymous (a failed sign-in); console: the shared-token console of earlier versions",
});

export const CreateAccountBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 64 }),
    plan: Type.Optional(Type.String({ minLength: 1 })),
    allowIps: Type.Optional(Type.Array(Type.String())),
    contacts: Type.Optional(Type.Array(Type.String())),
  },
  { additionalProperties: false },
);
export type CreateAccountBody = Static<typeof CreateAccountBody>;

/** Issue 32: an account's own budget, overriding its plan's; null goes back to the plan's. */
const BudgetBody = Type.Union([
  Type.Object(
    {
      amount: Type.Union([Type.Number({ minimum: 0 }), Type.String({ pattern: "^[0-9]+(\\.[0-9]{1,6})?$" })], { description: "In the config's currency, at most 6 decimals: 50, \"12.5\"" }),
      period: Type.Union([Type.Literal("day"), Type.Literal("month")], { description: "UTC calendar day or month" }),
    },
    { additionalProperties: false },
  ),
  Type.Null(),
]);

export const UpdateAccountBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    plan: Type.Optional(Type.String({ minLength: 1 })),
    allowIps: Type.Optional(Type.Array(Type.String())),
    contacts: Type.Optional(Type.Array(Type.String())),
    budget: Type.Optional(BudgetBody),
  },
  { additionalProperties: false },
);
export type UpdateAccountBody = Static<typeof UpdateAccountBody>;

export const CreateKeyBody = Type.Object(
  {
    account: Type.String({ minLength: 1 }),
    name: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    models: Type.Optional(Type.Union([Type.Array(Type.String({ minLength: 1 })), Type.Null()])),
    endpoints: Type.Optional(Type.Union([Type.Array(Endpoint), Type.Null()])),
    deployment: Type.Optional(Type.Union([Type.String({ minLength: 1 }), Type.Null()])),
  },
  { additionalProperties: false },
);
export type CreateKeyBody = Static<typeof CreateKeyBody>;

/** Every account and key change: support acting on a customer's emailed request names the contact it came from. */
export const OnBehalfOfHeaders = Type.Object({
  "x-on-behalf-of": Type.Optional(
    Type.String({ maxLength: 320, description: "A registered contact of the account who asked for this change; recorded in the audit log, refused (400) if not registered" }),
  ),
});

export const AccountParams = Type.Object({ account: Type.String() });
export type AccountParams = Static<typeof AccountParams>;

export const KeyParams = Type.Object({ id: Type.String() });
export type KeyParams = Static<typeof KeyParams>;

export const AccountQuery = Type.Object({ account: Type.Optional(Type.String()) }, { additionalProperties: false });
export type AccountQuery = Static<typeof AccountQuery>;

const Timestamp = Type.String({ description: "ISO 8601" });
const NullableStrings = Type.Union([Type.Array(Type.String()), Type.Null()]);

export const AccountSchema = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    plan: Type.String(),
    allowIps: Type.Array(Type.String(), { description: "CIDRs; empty = any address" }),
    contacts: Type.Array(Type.String(), { description: "Registered contact addresses" }),
    createdAt: Timestamp,
    budget: Type.Optional(
      Type.Union(
        [
          Type.Object({ amountMicros: Type.Integer({ description: "Micro-units of the config's currency (1 = 0.000001)" }), period: Type.Union([Type.Literal("day"), Type.Literal("month")]) }),
          Type.Null(),
        ],
        { description: "The account's own budget, overriding its plan's (issue 32); null: the plan's" },
      ),
    ),
  },
  { $id: "Account" },
);
export const AccountList = Type.Object({ object: Type.Literal("list"), data: Type.Array(Type.Ref(AccountSchema)) }, { $id: "AccountList" });

const keyFields = {
  id: Type.String(),
  prefix: Type.String({ description: "Display prefix; the only part of a key that is ever shown again" }),
  account: Type.String(),
  name: Type.Union([Type.String(), Type.Null()]),
  models: NullableStrings,
  endpoints: NullableStrings,
  deployment: Type.Union([Type.String(), Type.Null()]),
  createdAt: Timestamp,
};

export const KeySchema = Type.Object(
  {
    ...keyFields,
    accountName: Type.String(),
    lastUsedAt: Type.Union([Timestamp, Type.Null()]),
    revokedAt: Type.Union([Timestamp, Type.Null()]),
  },
  { $id: "ApiKey" },
);
export const KeyList = Type.Object({ object: Type.Literal("list"), data: Type.Array(Type.Ref(KeySchema)) }, { $id: "ApiKeyList" });

export const CreatedKeySchema = Type.Object(
  { ...keyFields, key: Type.String({ description: "The key value: shown in this answer only, never again" }) },
  { $id: "CreatedApiKey" },
);

export const RevokedKeySchema = Type.Object(
  {
    id: Type.String(),
    revokedAt: Timestamp,
    pending: Type.Optional(Type.Boolean({ description: "true (202): the database was unreachable; revoked on every replica, written when it returns" })),
  },
  { $id: "RevokedApiKey" },
);

export const UsageList = Type.Object(
  {
    object: Type.Literal("list"),
    data: Type.Array(
      Type.Object({
        accountId: Type.String(),
        accountName: Type.String(),
        keyId: Type.String(),
        model: Type.String(),
        endpoint: Type.String(),
        requests: Type.Integer(),
        promptTokens: Type.Integer(),
        completionTokens: Type.Integer(),
        cachedRequests: Type.Integer({ description: "Of requests, those answered from the response cache; their tokens are what the plan's cache.charge charged (none by default)" }),
        spendMicros: Type.Integer({ description: "Spend in micro-units of the currency (1 = 0.000001): the line's tokens × its model's pricing per million tokens, rounded half up once; 0 for a model without pricing" }),
        spend: Type.String({ description: "spendMicros as a decimal with 6 places, e.g. 0.001250" }),
        currency: Type.String({ description: "The config's currency (default USD)" }),
      }),
    ),
  },
  { $id: "UsageList" },
);

/** An account's Batch API batches with their progress (the console's Batches page). */
export const AdminBatchList = Type.Object(
  {
    object: Type.Literal("list"),
    data: Type.Array(
      Type.Object({
        id: Type.String(),
        accountId: Type.String(),
        keyId: Type.String(),
        endpoint: Type.String(),
        status: Type.String(),
        total: Type.Integer(),
        completed: Type.Integer(),
        failed: Type.Integer(),
        createdAt: Timestamp,
        expiresAt: Timestamp,
        endedAt: Type.Union([Timestamp, Type.Null()]),
      }),
    ),
  },
  { $id: "AdminBatchList" },
);

export const DailyUsageList = Type.Object(
  {
    object: Type.Literal("list"),
    data: Type.Array(
      Type.Object({
        day: Type.String({ description: "UTC day, YYYY-MM-DD" }),
        accountId: Type.String(),
        keyId: Type.String(),
        model: Type.String(),
        requests: Type.Integer(),
        promptTokens: Type.Integer(),
        completionTokens: Type.Integer(),
        cachedRequests: Type.Integer({ description: "Of requests, those answered from the response cache; their tokens are what the plan's cache.charge charged (none by default)" }),
        spendMicros: Type.Integer({ description: "Spend in micro-units of the currency (1 = 0.000001): the line's tokens × its model's pricing per million tokens, rounded half up once; 0 for a model without pricing" }),
        spend: Type.String({ description: "spendMicros as a decimal with 6 places, e.g. 0.001250" }),
        currency: Type.String({ description: "The config's currency (default USD)" }),
      }),
    ),
  },
  { $id: "DailyUsageList" },
);

export const AuditQuery = Type.Object(
  {
    account: Type.Optional(Type.String()),
    action: Type.Optional(Type.String()),
    actor: Type.Optional(Actor),
    // A query string is text, and the server does not coerce types (a JSON body's "1" is not 1): digits, read below.
    limit: Type.Optional(Type.String({ pattern: "^(10000|[1-9][0-9]{0,3})$", description: "1 to 10000 (default 500)" })),
  },
  { additionalProperties: false },
);
export type AuditQuery = Static<typeof AuditQuery>;

export const AuditList = Type.Object(
  {
    object: Type.Literal("list"),
    data: Type.Array(
      Type.Object({
        id: Type.String(),
        at: Timestamp,
        actor: Actor,
        actorId: Type.Union([Type.String(), Type.Null()], { description: "The console user's id (member or operator)" }),
        actorEmail: Type.Union([Type.String(), Type.Null()], { description: "The console user's email when the entry was written" }),
        onBehalfOf: Type.Union([Type.String(), Type.Null()], { description: "A registered contact of the account the operation was asked for by" }),
        action: Type.String({ description: "account.create, account.update, key.create, key.rotate, key.revoke, member.invite, member.join, member.role, member.remove, operator.*, user.totp.*, user.password_reset*, auth.login, auth.failed" }),
        accountId: Type.Union([Type.String(), Type.Null()]),
        keyId: Type.Union([Type.String(), Type.Null()], { description: "The key id; never a key value" }),
        source: Type.Union([Type.String(), Type.Null()], { description: "The client address of an HTTP call; local:USER@HOST for the CLI" }),
        detail: Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()]),
      }),
    ),
  },
  { $id: "AuditList", description: "Newest first. Append-only: the database refuses updates and deletes." },
);

export const UpstreamView = Type.Object({
  url: Type.String(),
  state: Type.Union([Type.Literal("healthy"), Type.Literal("ejected"), Type.Literal("probing")]),
  inFlight: Type.Integer(),
  maxInFlight: Type.Integer(),
  weight: Type.Number(),
  recentFailures: Type.Integer({ description: "Failed requests and health checks in the last minute" }),
  latencyMs: Type.Union([Type.Number(), Type.Null()], { description: "Moving average of the time to an answer" }),
  failuresTotal: Type.Integer({ description: "Failed requests and health checks since start" }),
  affinity: Type.Optional(
    Type.Object(
      {
        owner: Type.Integer({ description: "Attempts placed here as the upstream holding their conversation's cache: its ring owner, or where it settled after a spill" }),
        spill: Type.Integer({ description: "Attempts placed here because their owner was at the load bound or its maxInFlight" }),
        retry: Type.Integer({ description: "Retries placed here after another upstream failed" }),
      },
      { description: "routing prefix-affinity: placements since load" },
    ),
  ),
});

export const AdminModel = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal("model"),
    engine: Type.String(),
    source: Type.Union([Type.String(), Type.Null()]),
    path: Type.Union([Type.String(), Type.Null()]),
    state: Type.Union(["missing", "unloaded", "loading", "ready", "failed"].map((s) => Type.Literal(s))),
    error: Type.Union([Type.String(), Type.Null()]),
    active: Type.Integer({ description: "Slots in use" }),
    queueDepth: Type.Integer(),
    preparing: Type.Integer(),
    parallel: Type.Integer(),
    load: Type.Union([Type.Literal("eager"), Type.Literal("lazy")]),
    keepAliveMs: Type.Union([Type.Integer(), Type.Null()]),
    capabilities: Type.Array(Type.String()),
    sizeBytes: Type.Union([Type.Integer(), Type.Null()]),
    pullCommand: Type.Union([Type.String(), Type.Null()]),
    upstreams: Type.Optional(Type.Array(UpstreamView, { description: "engine upstream: each upstream of the pool" })),
    affinity: Type.Optional(
      Type.Object(
        {
          placements: Type.Integer({ description: "First attempts placed since load" }),
          spills: Type.Integer({ description: "Of those, placed past the upstream holding their cache (load bound or maxInFlight)" }),
          retries: Type.Integer(),
          hitRatio: Type.Union([Type.Number(), Type.Null()], { description: "Placed on the upstream holding their cache (ring owner or settled) / placements; null before any" }),
        },
        { description: "routing prefix-affinity: how often conversations reach the upstream holding their cache" },
      ),
    ),
    promptCache: Type.Optional(
      Type.Object(
        {
          promptTokens: Type.Integer({ description: "Prompt tokens of the chats run since load" }),
          reusedTokens: Type.Integer({ description: "Of those, tokens found in the chosen sequence's KV cache (not evaluated again)" }),
          hitRatio: Type.Union([Type.Number(), Type.Null()], { description: "reusedTokens / promptTokens; null before any chat" }),
        },
        { description: "engine llama: prefix reuse across conversation turns" },
      ),
    ),
    tenants: Type.Array(
      Type.Object({
        account: Type.String({ description: "Account id" }),
        weight: Type.Number({ description: "Its plan's weight" }),
        waiting: Type.Object({ interactive: Type.Integer(), batch: Type.Integer() }, { description: "Its requests in the model's queue, by priority" }),
        running: Type.Integer({ description: "Its requests holding slots" }),
        lead: Type.Number({ description: "Weighted tokens it has received beyond the least-served account waiting or running (its virtual counter minus theirs)" }),
        tokensLastMinute: Type.Number({ description: "Tokens served to it over the last minute (prompt + completion)" }),
        shareLastMinute: Type.Number({ description: "Its part of all the tokens the model served over the last minute (0..1)" }),
      }),
      { description: "Fair share: the queue by account, and each account's share of the service over the last minute (accounts waiting, running or served then)" },
    ),
  },
  { $id: "AdminModel" },
);
export const AdminModelList = Type.Object({ object: Type.Literal("list"), data: Type.Array(Type.Ref(AdminModel)) }, { $id: "AdminModelList" });

/** This feature's shared schemas: routes refer to them by `$id`, and the OpenAPI document lists them as components. */
export const adminSchemas: TSchema[] = [AccountSchema, AccountList, KeySchema, KeyList, CreatedKeySchema, RevokedKeySchema, UsageList, DailyUsageList, AdminBatchList, AuditList, AdminModel, AdminModelList];
