import type { AppContext } from "../app-context.ts";
import type { AuthContext } from "../auth/auth-context.ts";
import { assertScope } from "../auth/scope.ts";
import type { Capability, Endpoint } from "../config/config.schema.ts";
import type { ModelRunner } from "../scheduler/model-runner.ts";

/**
 * The first checks of every inference endpoint, in the decisions.md order: the model exists (404), the key and
 * plan may use it here (403 model_not_in_plan), and it can do what the endpoint needs (400, param "model").
 * Load state and capacity come later, after the endpoint's own parameter checks.
 */
export function requireModel(ctx: AppContext, auth: AuthContext, endpoint: Endpoint, modelId: string, capability: Capability, what: string): ModelRunner {
  const runner = ctx.catalog.get(modelId);
  assertScope(auth, endpoint, modelId, ctx.config.deployment);
  ctx.catalog.requireCapability(runner, capability, what);
  return runner;
}
