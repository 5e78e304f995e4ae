import type { AppConfig } from "../config/app-config.ts";
import { AppError } from "../errors/app-error.ts";
import { effectivePlan } from "../keys/effective-plan.ts";
import type { Account } from "../store/accounts.repo.ts";
import type { ApiKeyRecord } from "../store/keys.repo.ts";
import type { AuthContext } from "./auth-context.ts";
import { IpAllowlist } from "./ip-allowlist.ts";

/** A key as the store holds it, resolved into what it may do on this node. */
export interface ResolvedKey {
  /** Its effective limits: the plan with the account's overrides, the key's scopes, binding and allowlist. */
  auth: AuthContext;
  revoked: boolean;
  /** A key bound to a deployment is valid only there; an unbound key only on the shared deployment. */
  servesHere: boolean;
}

/**
 * Issue 42.1: the one place a key's effective limits are resolved, for every path that runs work under a key (the
 * /v1 requests, Batch API lines): its account's plan with the account's own budget in place of the plan's, its
 * model and endpoint scopes, its deployment binding and its account's allowlist. An account whose plan is not in
 * the config is 500 internal_error.
 */
export function resolveKey(config: AppConfig, found: { key: ApiKeyRecord; account: Account }): ResolvedKey {
  const { key, account } = found;
  const plan = effectivePlan(config, account);
  if (!plan) throw new AppError("internal_error", { message: "The account's plan is not configured on this server." });
  return {
    auth: {
      keyId: key.id,
      keyPrefix: key.prefix,
      accountId: account.id,
      accountName: account.name,
      plan,
      modelScopes: key.models,
      endpointScopes: key.endpoints,
      deployment: key.deployment,
      allowlist: account.allowIps.length > 0 ? new IpAllowlist(account.allowIps) : null,
    },
    revoked: key.revokedAt !== null,
    servesHere: (key.deployment ?? sharedDeployment) === config.deployment,
  };
}

/** The deployment of nodes that serve unbound keys. */
export const sharedDeployment = "shared";
