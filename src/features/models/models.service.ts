import type { AppContext } from "../../app-context.ts";
import type { AuthContext } from "../../auth/auth-context.ts";
import { assertGranted, grantsModel, grantsEndpoint } from "../../auth/key-grants.ts";
import type { Endpoint } from "../../config/config.schema.ts";
import { AppError } from "../../errors/app-error.ts";
import type { ModelRoute } from "../../catalog/model-route.ts";
import type { ModelRunner } from "../../scheduler/model-runner.ts";
import type { AnthropicModel, AnthropicModelList, Model, ModelList } from "./models.schema.ts";

function toModel(ctx: AppContext, runner: ModelRunner): Model {
  return { id: runner.entry.id, object: "model", created: ctx.catalog.created, owned_by: runner.entry.ownedBy };
}

/** The inference endpoints, each named after the capability a model needs to be called there. */
const inferenceEndpoints: Endpoint[] = ["chat", "embeddings", "transcriptions", "rerank"];

/** A route is listed like a model (issue 45). */
function routeModel(ctx: AppContext, route: ModelRoute): Model {
  return { id: route.id, object: "model", created: ctx.catalog.created, owned_by: "modelgate" };
}

/**
 * §1 "the models a key may call": the key may use the model and reach it through at least one endpoint; a route,
 * besides, only when the key may name one of its targets itself (a route never reaches an entry its caller could not).
 */
function callable(ctx: AppContext, auth: AuthContext, model: ModelRunner | ModelRoute): boolean {
  const [id, caps]: [string, readonly string[]] = "entry" in model ? [model.entry.id, model.entry.capabilities] : [model.id, model.config.capabilities];
  if (!grantsModel(auth, id)) return false;
  if (!("entry" in model) && !model.reachable((target) => grantsModel(auth, target))) return false;
  return inferenceEndpoints.some((endpoint) => caps.includes(endpoint) && grantsEndpoint(auth, endpoint, ctx.config.deployment));
}

interface Listing {
  runners: readonly ModelRunner[];
  list: ModelList;
  /** The list's JSON, in OpenAI's shape and in Anthropic's, made on first use. */
  text?: string;
  anthropicText?: string;
}
/**
 * The list per key, kept while both its auth context (cached per key for about a second, auth/api-key.plugin.ts) and the
 * catalog (a reload gives a new runner array) stay the same, so a client polling /v1/models costs one lookup.
 */
const listed = new WeakMap<AuthContext, Listing>();

/** §4.1: the models this key may call on this node, as JSON text in OpenAI's shape or Anthropic's (serialized once per cached list). */
export function listModelsJson(ctx: AppContext, auth: AuthContext, anthropic: boolean): string {
  const cached = listing(ctx, auth);
  if (anthropic) return (cached.anthropicText ??= JSON.stringify(toAnthropicList(cached.list)));
  return (cached.text ??= JSON.stringify(cached.list));
}

function listing(ctx: AppContext, auth: AuthContext): Listing {
  const runners = ctx.catalog.list();
  const hit = listed.get(auth);
  if (hit?.runners === runners) return hit;
  const entries = runners.filter((runner) => callable(ctx, auth, runner)).map((runner) => toModel(ctx, runner));
  const routes = ctx.catalog.routeList().filter((route) => callable(ctx, auth, route)).map((route) => routeModel(ctx, route));
  const fresh: Listing = { runners, list: { object: "list", data: [...entries, ...routes] } };
  listed.set(auth, fresh);
  return fresh;
}

export function retrieveModel(ctx: AppContext, auth: AuthContext, id: string): Model {
  const model = ctx.catalog.route(id) ?? ctx.catalog.get(id);
  assertGranted(auth, "models", id, ctx.config.deployment);
  if (!callable(ctx, auth, model)) {
    throw new AppError("model_not_in_plan", { param: "model", message: `This key's plan includes no endpoint that serves the model '${id}'.` });
  }
  return "entry" in model ? toModel(ctx, model) : routeModel(ctx, model);
}

/** A model in Anthropic's shape, for a client that sent `anthropic-version` (its SDKs' models.list and retrieve). */
export function toAnthropicModel(model: Model): AnthropicModel {
  return { type: "model", id: model.id, display_name: model.id, created_at: new Date(model.created * 1000).toISOString() };
}

/** The list in Anthropic's shape: one page, every model on it. */
function toAnthropicList(list: ModelList): AnthropicModelList {
  const data = list.data.map(toAnthropicModel);
  return { data, has_more: false, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null };
}
