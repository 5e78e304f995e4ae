import { Type } from "@sinclair/typebox";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { principal, reaches } from "../../auth/access.ts";
import { actorOf, isOperatorRole } from "../../auth/principal.ts";
import { inviteUser, passwordResetLink, withdrawLink, type CreatedInvite } from "../../auth/console-users.ts";
import { changeRole, findUser, removeUser, userView } from "../../auth/members.ts";
import { errorResponses } from "../../errors/error.schema.ts";
import { AppError } from "../../errors/app-error.ts";
import { LifecycleError, findAccount, type AuditContext } from "../../keys/lifecycle.ts";
import { meterStatus } from "../../keys/meter-status.ts";
import type { User } from "../../auth/principal.ts";
import { AccountParams } from "./admin.schema.ts";
import { CreatedLinkSchema, IdParams, InviteBody, PlanLimitsSchema, ResetLinkBody, RoleBody, UserList, UserSchema } from "./members.schema.ts";
import { run } from "./run.ts";

const errors = errorResponses(400, 401, 403, 404, 413, 429, 500, 503);
const tags = ["admin"];

function by(request: FastifyRequest): AuditContext {
  return { ...actorOf(principal(request)), source: request.clientIp || request.ip };
}

/** The same 404 as an unknown id when a member names another account's user or invite. */
const noUser = (id: string) => new LifecycleError("not_found", "id", `no user "${id}"`);

/**
 * Console users through the admin API: an account's members and invites (owners of the account, and operators),
 * the operators (operator-admins and the admin token; operator-viewers read), role changes, removal and
 * password-reset links; and the plan's limits as an account sees them.
 */
export default async function membersAdminRoutes(app: FastifyInstance): Promise<void> {
  const store = () => app.keyStore;
  const withUrl = (link: CreatedInvite) => ({ ...link, url: app.ctx.config.console.publicUrl ? `${app.ctx.config.console.publicUrl}${link.path}` : null });

  /** An account the caller reaches (a member: their own), or the 404 an unknown one gets. */
  async function reachableAccount(request: FastifyRequest, idOrName: string) {
    const account = await findAccount(store(), idOrName);
    if (!reaches(request, account.id)) throw new LifecycleError("not_found", "account", `no account "${idOrName}"`);
    return account;
  }

  /** The unused, unexpired invites and reset links of an account (or of the operators), beside its users. */
  async function openLinks(accountId: string | null) {
    const at = new Date().toISOString();
    const [invites, resets] = await Promise.all([store().invites.pending(accountId, at), store().invites.pending(accountId, at, "reset")]);
    const resetLinks = resets.map(({ id, userId, email, expiresAt, createdByEmail, clearsTotp }) => ({ id, userId: userId!, email, expiresAt, createdByEmail, clearsTotp }));
    return { invites, resetLinks };
  }

  /** A user the caller may manage: members of their own account for an owner; any user for operators. */
  async function manageableUser(request: FastifyRequest, id: string): Promise<User> {
    const user = await findUser(store(), id);
    const p = principal(request);
    if (p.kind === "member" && (user.accountId === null || !reaches(request, user.accountId))) throw noUser(id);
    return user;
  }

  app.get<{ Params: AccountParams }>(
    "/accounts/:account/members",
    { config: { access: "members" }, schema: { operationId: "listMembers", tags, params: AccountParams, response: { 200: Type.Ref(UserList), ...errors } } },
    async (request) =>
      run(async () => {
        const account = await reachableAccount(request, request.params.account);
        const users = (await store().users.list(account.id)).filter((u) => !u.disabledAt);
        return { object: "list" as const, data: users.map(userView), ...(await openLinks(account.id)) };
      }),
  );

  app.post<{ Params: AccountParams; Body: InviteBody }>(
    "/accounts/:account/invites",
    { config: { access: "members" }, schema: { operationId: "inviteMember", tags, params: AccountParams, body: InviteBody, response: { 201: Type.Ref(CreatedLinkSchema), ...errors } } },
    async (request, reply) => {
      const link = await run(async () => {
        const account = await reachableAccount(request, request.params.account);
        return inviteUser(store(), { email: request.body.email, role: request.body.role, accountId: account.id }, by(request));
      });
      return reply.code(201).send(withUrl(link));
    },
  );

  app.get(
    "/operators",
    { schema: { operationId: "listOperators", tags, response: { 200: Type.Ref(UserList), ...errors } } },
    async () =>
      run(async () => {
        const users = (await store().users.list(null)).filter((u) => !u.disabledAt);
        return { object: "list" as const, data: users.map(userView), ...(await openLinks(null)) };
      }),
  );

  app.post<{ Body: InviteBody }>(
    "/operators/invites",
    { schema: { operationId: "inviteOperator", tags, body: InviteBody, response: { 201: Type.Ref(CreatedLinkSchema), ...errors } } },
    async (request, reply) => reply.code(201).send(withUrl(await run(() => inviteUser(store(), { email: request.body.email, role: request.body.role, accountId: null }, by(request))))),
  );

  app.patch<{ Params: IdParams; Body: RoleBody }>(
    "/users/:id",
    { config: { access: "members" }, schema: { operationId: "updateUser", tags, params: IdParams, body: RoleBody, response: { 200: Type.Ref(UserSchema), ...errors } } },
    async (request) => run(async () => userView(await changeRole(store(), await manageableUser(request, request.params.id), request.body.role, by(request)))),
  );

  app.delete<{ Params: IdParams }>(
    "/users/:id",
    { config: { access: "members" }, schema: { operationId: "removeUser", tags, params: IdParams, response: { 200: Type.Object({ id: Type.String(), removed: Type.Literal(true) }), ...errors } } },
    async (request) =>
      run(async () => {
        const user = await manageableUser(request, request.params.id);
        await removeUser(store(), user, by(request));
        await app.consoleSessions.deleteUser(user.id);
        return { id: user.id, removed: true as const };
      }),
  );

  app.post<{ Params: IdParams; Body: ResetLinkBody }>(
    "/users/:id/password-reset",
    { config: { access: "members" }, schema: { operationId: "passwordResetLink", tags, params: IdParams, body: ResetLinkBody, response: { 201: Type.Ref(CreatedLinkSchema), ...errors } } },
    async (request, reply) => {
      const clearTotp = request.body?.clearTotp === true;
      // Issue 42.9: a reset that also turns TOTP off takes over the account without its second factor: operators only.
      if (clearTotp && principal(request).kind === "member") throw new AppError("permission_denied", { message: "Only an operator can clear a user's two-factor sign-in." });
      const link = await run(async () => {
        const user = await manageableUser(request, request.params.id);
        if (app.oidc && isOperatorRole(user.role)) throw new LifecycleError("invalid_parameter", "id", "Operators sign in through single sign-on on this server: there is no password to reset.");
        return passwordResetLink(store(), user, by(request), { clearTotp });
      });
      return reply.code(201).send(withUrl(link));
    },
  );

  app.delete<{ Params: IdParams }>(
    "/invites/:id",
    { config: { access: "members" }, schema: { operationId: "withdrawInvite", summary: "Withdraw an unused invite or password-reset link", tags, params: IdParams, response: { 200: Type.Object({ id: Type.String(), withdrawn: Type.Literal(true) }), ...errors } } },
    async (request) =>
      run(async () => {
        const invite = await store().invites.get(request.params.id);
        const p = principal(request);
        if (!invite || invite.usedAt || (p.kind === "member" && (invite.accountId === null || !reaches(request, invite.accountId)))) {
          throw new LifecycleError("not_found", "id", `no open invite "${request.params.id}"`);
        }
        await withdrawLink(store(), invite, by(request));
        return { id: invite.id, withdrawn: true as const };
      }),
  );

  app.get<{ Params: AccountParams }>(
    "/accounts/:account/plan",
    { config: { access: "read" }, schema: { operationId: "getPlanLimits", tags, params: AccountParams, response: { 200: Type.Ref(PlanLimitsSchema), ...errors } } },
    async (request) =>
      run(async () => {
        const account = await reachableAccount(request, request.params.account);
        const plan = app.ctx.config.plans.get(account.plan);
        if (!plan) throw new AppError("internal_error", { message: `The account's plan "${account.plan}" is not configured.` });
        const limit = (l: { requests: number; windowMs: number }) => ({ requests: l.requests, windowSeconds: l.windowMs / 1000 });
        const status = await meterStatus(store(), app.ctx.config, account);
        return {
          name: plan.name,
          rateLimit: limit(plan.rateLimit),
          accountRateLimit: limit(plan.accountRateLimit),
          maxBodyBytes: plan.maxBodyBytes,
          maxUploadBytes: plan.maxUploadBytes,
          maxOutputTokens: plan.maxOutputTokens,
          models: plan.models,
          endpoints: plan.endpoints,
          ipAllowlist: plan.ipAllowlist,
          tokenLimit: plan.tokenLimit && { tokens: plan.tokenLimit.tokens, windowSeconds: plan.tokenLimit.windowMs / 1000 },
          accountTokenLimit: plan.accountTokenLimit && { tokens: plan.accountTokenLimit.tokens, windowSeconds: plan.accountTokenLimit.windowMs / 1000 },
          tokenQuota: status.quota,
          budget: status.budget,
        };
      }),
  );
}
