import { Type } from "@sinclair/typebox";
import type { FastifyInstance } from "fastify";
import { errorResponses } from "../../errors/error.schema.ts";
import {
  createAccount,
  createKey,
  findAccount,
  lifecycleToAppError,
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
  AuditList,
  AuditQuery,
  OnBehalfOfHeaders,
} from "./admin.schema.ts";
import type { FastifyRequest } from "fastify";
import type { AuditContext } from "../../keys/lifecycle.ts";

/**
 * Who makes an admin call, for the audit log: a console login or the admin token (auth/admin-auth.plugin.ts sets
 * which), the `x-on-behalf-of` contact when support acts on a customer's request, and the client address.
 */
function auditOf(request: FastifyRequest): AuditContext {
  const header = request.headers["x-on-behalf-of"];
  return { actor: request.adminActor ?? "admin-token", onBehalfOf: typeof header === "string" ? header : null, source: request.clientIp || request.ip };
}

async function run<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw lifecycleToAppError(err);
  }
}

const adminErrors = errorResponses(400, 401, 404, 413, 429, 500, 503);
const tags = ["admin"];

/**
 * The admin HTTP API (/admin/v1, paths relative to it): the same operations as `modelgate accounts|keys|usage`.
 * The admin scope (src/scopes/admin.scope.ts) checks the admin token before anything else.
 */
export default async function adminRoutes(app: FastifyInstance): Promise<void> {
  const store = () => app.keyStore;
  // The unknown-key cache can only hold values sent before their key existed; cleared anyway, so a new key never waits.
  const keyCreated = () => app.apiKeys.keyCreated();

  app.post<{ Body: CreateAccountBody }>(
    "/accounts",
    { schema: { operationId: "createAccount", tags, headers: OnBehalfOfHeaders, body: CreateAccountBody, response: { 201: Type.Ref(AccountSchema), ...adminErrors } } },
    async (request, reply) => reply.code(201).send(await run(() => createAccount(store(), app.ctx.config, request.body, auditOf(request)))),
  );

  app.get(
    "/accounts",
    { schema: { operationId: "listAccounts", tags, response: { 200: Type.Ref(AccountList), ...adminErrors } } },
    async () => ({ object: "list" as const, data: await listAccounts(store()) }),
  );

  app.get<{ Params: AccountParams }>(
    "/accounts/:account",
    { schema: { operationId: "getAccount", tags, params: AccountParams, response: { 200: Type.Ref(AccountSchema), ...adminErrors } } },
    async (request) => run(() => findAccount(store(), request.params.account)),
  );

  app.patch<{ Params: AccountParams; Body: UpdateAccountBody }>(
    "/accounts/:account",
    { schema: { operationId: "updateAccount", tags, headers: OnBehalfOfHeaders, params: AccountParams, body: UpdateAccountBody, response: { 200: Type.Ref(AccountSchema), ...adminErrors } } },
    async (request) => run(() => updateAccount(store(), app.ctx.config, request.params.account, request.body, auditOf(request))),
  );

  app.post<{ Body: CreateKeyBody }>(
    "/keys",
    { schema: { operationId: "createKey", tags, headers: OnBehalfOfHeaders, body: CreateKeyBody, response: { 201: Type.Ref(CreatedKeySchema), ...adminErrors } } },
    async (request, reply) => {
      const created = await run(() => createKey(store(), request.body, auditOf(request)));
      keyCreated();
      return reply.code(201).send(created);
    },
  );

  app.get<{ Querystring: AccountQuery }>(
    "/keys",
    { schema: { operationId: "listKeys", tags, querystring: AccountQuery, response: { 200: Type.Ref(KeyList), ...adminErrors } } },
    async (request) => ({ object: "list" as const, data: await run(() => listKeys(store(), request.query.account)) }),
  );

  app.post<{ Params: KeyParams }>(
    "/keys/:id/rotate",
    { schema: { operationId: "rotateKey", tags, headers: OnBehalfOfHeaders, params: KeyParams, response: { 201: Type.Ref(CreatedKeySchema), ...adminErrors } } },
    async (request, reply) => {
      const created = await run(() => rotateKey(store(), request.params.id, auditOf(request)));
      keyCreated();
      return reply.code(201).send(created);
    },
  );

  app.post<{ Params: KeyParams }>(
    "/keys/:id/revoke",
    { schema: { operationId: "revokeKey", tags, headers: OnBehalfOfHeaders, params: KeyParams, response: { 200: Type.Ref(RevokedKeySchema), 202: Type.Ref(RevokedKeySchema), ...adminErrors } } },
    // 202 while the database is unreachable: in effect on every replica at once, written when it returns.
    async (request, reply) => {
      const revoked = await run(() => revokeKey(store(), request.params.id, auditOf(request), app.revocations));
      // In effect on this node at once, with or without Redis (which tells the other replicas).
      app.apiKeys.forget(revoked.id);
      return reply.code(revoked.pending ? 202 : 200).send(revoked);
    },
  );

  app.get<{ Querystring: AccountQuery }>(
    "/usage",
    { schema: { operationId: "getUsage", tags, querystring: AccountQuery, response: { 200: Type.Ref(UsageList), ...adminErrors } } },
    async (request) =>
      run(async () => {
        const accountId = request.query.account ? (await findAccount(store(), request.query.account)).id : undefined;
        return { object: "list" as const, data: await store().usage.summary(accountId) };
      }),
  );

  app.get<{ Querystring: AccountQuery }>(
    "/usage/daily",
    { schema: { operationId: "getDailyUsage", tags, querystring: AccountQuery, response: { 200: Type.Ref(DailyUsageList), ...adminErrors } } },
    async (request) =>
      run(async () => {
        const accountId = request.query.account ? (await findAccount(store(), request.query.account)).id : undefined;
        return { object: "list" as const, data: await store().usage.daily(accountId) };
      }),
  );

  app.get<{ Querystring: AuditQuery }>(
    "/audit",
    { schema: { operationId: "listAudit", tags, querystring: AuditQuery, response: { 200: Type.Ref(AuditList), ...adminErrors } } },
    async (request) =>
      run(async () => {
        const { account, action, actor, limit } = request.query;
        const accountId = account ? (await findAccount(store(), account)).id : undefined;
        return { object: "list" as const, data: await store().audit.list({ account: accountId, action, actor, limit: limit === undefined ? undefined : Number(limit) }) };
      }),
  );
}
