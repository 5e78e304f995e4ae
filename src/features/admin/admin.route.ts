import type { FastifyInstance } from "fastify";
import { AppError } from "../../errors/app-error.ts";
import {
  LifecycleError,
  createAccount,
  createKey,
  findAccount,
  listAccounts,
  listKeys,
  revokeKey,
  rotateKey,
  updateAccount,
  type AccountView,
  type CreatedKey,
} from "../../keys/lifecycle.ts";
import { requireAdmin } from "./admin-auth.ts";
import { AccountParams, AccountQuery, CreateAccountBody, CreateKeyBody, KeyParams, UpdateAccountBody } from "./admin.schema.ts";

function toAppError(err: unknown): unknown {
  if (!(err instanceof LifecycleError)) return err;
  if (err.code === "not_found") return new AppError("model_not_found", { param: err.param, message: err.message });
  return new AppError("invalid_parameter", { param: err.param, message: err.message });
}

async function run<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toAppError(err);
  }
}

const account = (a: AccountView) => ({ id: a.id, name: a.name, plan: a.plan, allowIps: a.allowIps, contacts: a.contacts, createdAt: a.createdAt });
const createdKey = (k: CreatedKey) => ({ id: k.id, key: k.key, prefix: k.prefix, account: k.account, name: k.name, models: k.models, endpoints: k.endpoints, deployment: k.deployment, createdAt: k.createdAt });

/**
 * The admin HTTP API (/admin/v1): the same operations as `modelgate accounts|keys|usage`. Outside the API-key
 * world (`public: true`); every route checks the admin token first, before body parsing.
 */
export default async function adminRoutes(app: FastifyInstance): Promise<void> {
  const config = { public: true } as const;
  const store = () => app.keyStore;
  app.addHook("onRequest", async (request) => {
    if (request.url.startsWith("/admin/v1/")) requireAdmin(request);
  });

  app.post<{ Body: CreateAccountBody }>("/admin/v1/accounts", { config, schema: { body: CreateAccountBody } }, async (request, reply) => {
    const created = await run(() => createAccount(store(), app.ctx.config, request.body));
    return reply.code(201).send(account(created));
  });

  app.get("/admin/v1/accounts", { config }, async () => ({ object: "list", data: (await listAccounts(store())).map(account) }));

  app.get<{ Params: AccountParams }>("/admin/v1/accounts/:account", { config, schema: { params: AccountParams } }, async (request) =>
    run(async () => account(await findAccount(store(), request.params.account))),
  );

  app.patch<{ Params: AccountParams; Body: UpdateAccountBody }>(
    "/admin/v1/accounts/:account",
    { config, schema: { params: AccountParams, body: UpdateAccountBody } },
    async (request) => account(await run(() => updateAccount(store(), app.ctx.config, request.params.account, request.body))),
  );

  app.post<{ Body: CreateKeyBody }>("/admin/v1/keys", { config, schema: { body: CreateKeyBody } }, async (request, reply) => {
    const created = await run(() => createKey(store(), request.body));
    return reply.code(201).send(createdKey(created));
  });

  app.get<{ Querystring: AccountQuery }>("/admin/v1/keys", { config, schema: { querystring: AccountQuery } }, async (request) => ({
    object: "list",
    data: await run(() => listKeys(store(), request.query.account)),
  }));

  app.post<{ Params: KeyParams }>("/admin/v1/keys/:id/rotate", { config, schema: { params: KeyParams } }, async (request, reply) => {
    const created = await run(() => rotateKey(store(), request.params.id));
    return reply.code(201).send(createdKey(created));
  });

  app.post<{ Params: KeyParams }>("/admin/v1/keys/:id/revoke", { config, schema: { params: KeyParams } }, async (request) =>
    run(() => revokeKey(store(), request.params.id)),
  );

  app.get<{ Querystring: AccountQuery }>("/admin/v1/usage", { config, schema: { querystring: AccountQuery } }, async (request) =>
    run(async () => {
      const accountId = request.query.account ? (await findAccount(store(), request.query.account)).id : undefined;
      return { object: "list", data: await store().usage.summary(accountId) };
    }),
  );
}
