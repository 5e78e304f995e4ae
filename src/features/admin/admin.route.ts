import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { errorResponses } from "../../errors/error.schema.ts";
import { ownAccount, principal, reaches } from "../../auth/access.ts";
import { actorOf } from "../../auth/principal.ts";
import { run } from "./run.ts";
import { spendOf } from "../../config/money.ts";
import {
  createAccount,
  createKey,
  findAccount,
  LifecycleError,
  listAccounts,
  listKeys,
  revokeKey,
  rotateKey,
  updateAccount,
} from "../../keys/lifecycle.ts";
import {
  AccountList,
  AccountParams,
  AccountQuery,
  AccountSchema,
  CreateAccountBody,
  CreateKeyBody,
  CreatedKeySchema,
  KeyList,
  KeyParams,
  RevokedKeySchema,
  UpdateAccountBody,
  UsageList,
  DailyUsageList,
  AdminBatchList,
  AuditList,
  AuditQuery,
  OnBehalfOfHeaders,
} from "./admin.schema.ts";
import type { FastifyRequest } from "fastify";
import type { AuditContext } from "../../keys/lifecycle.ts";

/**
 * Who makes an admin call, for the audit log: the console user (member or operator, by id and email) or the admin
 * token (auth/admin-auth.plugin.ts sets which), the `x-on-behalf-of` contact when support acts on a customer's
 * request, and the client address.
 */
function auditOf(request: FastifyRequest): AuditContext {
  const header = request.headers["x-on-behalf-of"];
  return { ...actorOf(principal(request)), onBehalfOf: typeof header === "string" ? header : null, source: request.clientIp || request.ip };
}

const adminErrors = errorResponses(400, 401, 403, 404, 413, 429, 500, 503);
const tags = ["admin"];

/**
 * The admin HTTP API (/admin/v1, paths relative to it): the same operations as `modelgate accounts|keys|usage`.
 * The admin scope (src/scopes/admin.scope.ts) authenticates the caller and checks its role against each route's
 * `config.access` (auth/access.ts); here each route confines a member to their own account, answering another
 * account's ids exactly as unknown ones.
 */
export default async function adminRoutes(app: FastifyInstance): Promise<void> {
  const store = () => app.keyStore;
  /** Issue 32: each usage line's spend, exact in micro-units. */
  const withSpend = <T extends { model: string; promptTokens: number; completionTokens: number }>(rows: T[]) => rows.map((r) => ({ ...r, ...spendOf(app.ctx.config, r) }));
  // The unknown-key cache can only hold values sent before their key existed; cleared anyway, so a new key never waits.
  const keyCreated = () => app.apiKeys.keyCreated();

  /** The account (by id or name) if the caller reaches it; otherwise the same 404 as an unknown one. */
  async function reachableAccount(request: FastifyRequest, idOrName: string) {
    const account = await findAccount(store(), idOrName);
    if (!reaches(request, account.id)) throw new LifecycleError("not_found", "account", `no account "${idOrName}"`);
    return account;
  }

  /** The account a listing is for: the one asked for (checked), or a member's own when none is. */
  async function listedAccount(request: FastifyRequest, asked: string | undefined): Promise<string | undefined> {
    if (asked) return (await reachableAccount(request, asked)).id;
    return ownAccount(request) ?? undefined;
  }

  /** A key of an account the caller reaches, or the same 404 as an unknown key. */
  async function reachableKey(request: FastifyRequest, id: string): Promise<void> {
    const key = await store().keys.get(id);
    if (key && !reaches(request, key.accountId)) throw new LifecycleError("not_found", "id", `no key "${id}"`);
  }

  /**
   * A member's key stays within the plan: endpoints the plan has, and no dedicated deployment (an operator's
   * decision: a deployment opens rerank whatever the plan says).
   */
  async function checkMemberKey(request: FastifyRequest, accountId: string, body: CreateKeyBody): Promise<void> {
    if (ownAccount(request) === null) return;
    if (body.deployment) throw new LifecycleError("invalid_parameter", "deployment", "only an operator binds a key to a dedicated deployment");
    const account = await findAccount(store(), accountId);
    const plan = app.ctx.config.plans.get(account.plan);
    const outside = (body.endpoints ?? []).filter((e) => !plan?.endpoints.includes(e));
    if (outside.length > 0) throw new LifecycleError("invalid_parameter", "endpoints", `the plan "${account.plan}" does not include ${outside.join(", ")}`);
  }

  app.post<{ Body: CreateAccountBody }>(
    "/accounts",
    { schema: { operationId: "createAccount", tags, headers: OnBehalfOfHeaders, body: CreateAccountBody, response: { 201: Type.Ref(AccountSchema), ...adminErrors } } },
    async (request, reply) => reply.code(201).send(await run(() => createAccount(store(), app.ctx.config, request.body, auditOf(request)))),
  );

  app.get(
    "/accounts",
    { config: { access: "read" }, schema: { operationId: "listAccounts", tags, response: { 200: Type.Ref(AccountList), ...adminErrors } } },
    async (request) => ({ object: "list" as const, data: (await run(() => listAccounts(store()))).filter((a) => reaches(request, a.id)) }),
  );

  app.get<{ Params: AccountParams }>(
    "/accounts/:account",
    { config: { access: "read" }, schema: { operationId: "getAccount", tags, params: AccountParams, response: { 200: Type.Ref(AccountSchema), ...adminErrors } } },
    async (request) => run(() => reachableAccount(request, request.params.account)),
  );

  app.patch<{ Params: AccountParams; Body: UpdateAccountBody }>(
    "/accounts/:account",
    { schema: { operationId: "updateAccount", tags, headers: OnBehalfOfHeaders, params: AccountParams, body: UpdateAccountBody, response: { 200: Type.Ref(AccountSchema), ...adminErrors } } },
    async (request) => run(() => updateAccount(store(), app.ctx.config, request.params.account, request.body, auditOf(request))),
  );

  app.post<{ Body: CreateKeyBody }>(
    "/keys",
    { config: { access: "keys" }, schema: { operationId: "createKey", tags, headers: OnBehalfOfHeaders, body: CreateKeyBody, response: { 201: Type.Ref(CreatedKeySchema), ...adminErrors } } },
    async (request, reply) => {
      const created = await run(async () => {
        const account = await reachableAccount(request, request.body.account);
        await checkMemberKey(request, account.id, request.body);
        return createKey(store(), { ...request.body, account: account.id }, auditOf(request));
      });
      keyCreated();
      return reply.code(201).send(created);
    },
  );

  app.get<{ Querystring: AccountQuery }>(
    "/keys",
    { config: { access: "read" }, schema: { operationId: "listKeys", tags, querystring: AccountQuery, response: { 200: Type.Ref(KeyList), ...adminErrors } } },
    async (request) => ({ object: "list" as const, data: await run(async () => listKeys(store(), await listedAccount(request, request.query.account))) }),
  );

  app.post<{ Params: KeyParams }>(
    "/keys/:id/rotate",
    { config: { access: "keys" }, schema: { operationId: "rotateKey", tags, headers: OnBehalfOfHeaders, params: KeyParams, response: { 201: Type.Ref(CreatedKeySchema), ...adminErrors } } },
    async (request, reply) => {
      const created = await run(async () => {
        await reachableKey(request, request.params.id);
        return rotateKey(store(), request.params.id, auditOf(request));
      });
      keyCreated();
      return reply.code(201).send(created);
    },
  );

  app.post<{ Params: KeyParams }>(
    "/keys/:id/revoke",
    { config: { access: "keys" }, schema: { operationId: "revokeKey", tags, headers: OnBehalfOfHeaders, params: KeyParams, response: { 200: Type.Ref(RevokedKeySchema), 202: Type.Ref(RevokedKeySchema), ...adminErrors } } },
    // 202 while the database is unreachable: in effect on every replica at once, written when it returns.
    async (request, reply) => {
      const revoked = await run(async () => {
        // A member's revocation needs the database (to know the key is theirs); an operator's works without it.
        if (ownAccount(request) !== null) await reachableKey(request, request.params.id);
        return revokeKey(store(), request.params.id, auditOf(request), app.revocations);
      });
      // In effect on this node at once, with or without Redis (which tells the other replicas).
      app.apiKeys.forget(revoked.id);
      return reply.code(revoked.pending ? 202 : 200).send(revoked);
    },
  );

  app.get<{ Querystring: AccountQuery }>(
    "/usage",
    { config: { access: "read" }, schema: { operationId: "getUsage", tags, querystring: AccountQuery, response: { 200: Type.Ref(UsageList), ...adminErrors } } },
    async (request) => run(async () => ({ object: "list" as const, data: withSpend(await store().usage.summary(await listedAccount(request, request.query.account))) })),
  );

  app.get<{ Querystring: AccountQuery }>(
    "/usage/daily",
    { config: { access: "read" }, schema: { operationId: "getDailyUsage", tags, querystring: AccountQuery, response: { 200: Type.Ref(DailyUsageList), ...adminErrors } } },
    async (request) => run(async () => ({ object: "list" as const, data: withSpend(await store().usage.daily(await listedAccount(request, request.query.account))) })),
  );

  app.get<{ Querystring: AccountQuery }>(
    "/batches",
    {
      config: { access: "read" },
      schema: { operationId: "listAccountBatches", tags, summary: "The newest 100 Batch API batches of the account (of every account for operators), with progress", querystring: AccountQuery, response: { 200: Type.Ref(AdminBatchList), ...adminErrors } },
    },
    async (request) =>
      run(async () => {
        const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
        const batches = await store().batches.recent(await listedAccount(request, request.query.account), 100);
        const data = batches.map((b) => ({
          id: b.id,
          accountId: b.accountId,
          keyId: b.keyId,
          endpoint: b.endpoint,
          status: b.status,
          total: b.total,
          completed: b.completed,
          failed: b.failed,
          createdAt: iso(b.createdAt)!,
          expiresAt: iso(b.expiresAt)!,
          endedAt: iso(b.completedAt ?? b.failedAt ?? b.expiredAt ?? b.cancelledAt),
        }));
        return { object: "list" as const, data };
      }),
  );

  app.get<{ Querystring: AuditQuery }>(
    "/audit",
    { config: { access: "read" }, schema: { operationId: "listAudit", tags, querystring: AuditQuery, response: { 200: Type.Ref(AuditList), ...adminErrors } } },
    async (request) =>
      run(async () => {
        const { account, action, actor, limit } = request.query;
        const accountId = await listedAccount(request, account);
        return { object: "list" as const, data: await store().audit.list({ account: accountId, action, actor, limit: limit === undefined ? undefined : Number(limit) }) };
      }),
  );
}
