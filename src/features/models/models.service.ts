import type { AppContext } from "../../app-context.ts";
import type { AuthContext } from "../../auth/auth-context.ts";
import { assertScope, canUseModel } from "../../auth/scope.ts";
import type { ModelRunner } from "../../scheduler/model-runner.ts";
import type { Model, ModelList } from "./models.schema.ts";

function toModel(ctx: AppContext, runner: ModelRunner): Model {
  return { id: runner.entry.id, object: "model", created: ctx.catalog.created, owned_by: runner.entry.ownedBy };
}

/** §4.1: the models this key may call on this node. */
export function listModels(ctx: AppContext, auth: AuthContext): ModelList {
  const data = ctx.catalog
    .list()
    .filter((runner) => canUseModel(auth, runner.entry.id))
    .map((runner) => toModel(ctx, runner));
  return { object: "list", data };
}

export function retrieveModel(ctx: AppContext, auth: AuthContext, id: string): Model {
  const runner = ctx.catalog.get(id);
  assertScope(auth, "models", id, ctx.config.deployment);
  return toModel(ctx, runner);
}
