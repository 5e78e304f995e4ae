import type { AuthContext } from "./auth-context.ts";
import type { Capability, Endpoint } from "../config/config.schema.ts";
import { AppError } from "../errors/app-error.ts";

/** Compiled patterns: they come from plans and keys, so there are few; the cap only bounds a pathological store. */
const compiled = new Map<string, RegExp | null>();
const compiledMax = 10_000;

function compile(pattern: string): RegExp | null {
  let re = compiled.get(pattern);
  if (re !== undefined) return re;
  // null: no wildcard, matched by equality.
  re = /[*?]/.test(pattern) ? new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".")}$`) : null;
  if (compiled.size >= compiledMax) compiled.clear();
  compiled.set(pattern, re);
  return re;
}

/** Matches a model id against a glob pattern where `*` is any run of characters and `?` one character. */
export function globMatch(pattern: string, value: string): boolean {
  if (pattern === "*") return true;
  const re = compile(pattern);
  return re === null ? pattern === value : re.test(value);
}

/** Whether the key and its plan grant this model (GET /v1/models lists only those). */
export function grantsModel(auth: AuthContext, modelId: string): boolean {
  if (!auth.plan.models.some((p) => globMatch(p, modelId))) return false;
  return auth.modelScopes === null || auth.modelScopes.some((p) => globMatch(p, modelId));
}

/**
 * Whether the key and its plan may use this endpoint on this node. A key bound to a dedicated deployment
 * may call rerank on its own node whatever its plan (decisions.md).
 */
export function grantsEndpoint(auth: AuthContext, endpoint: Endpoint, nodeDeployment: string): boolean {
  if (auth.endpointScopes !== null && !auth.endpointScopes.includes(endpoint)) return false;
  if (auth.plan.endpoints.includes(endpoint)) return true;
  return endpoint === "rerank" && auth.deployment !== null && auth.deployment === nodeDeployment;
}

/** 403 model_not_in_plan (param "model") when the key or its plan does not grant the endpoint or the model. */
export function assertGranted(auth: AuthContext, endpoint: Endpoint, modelId: string, nodeDeployment: string): void {
  if (!grantsEndpoint(auth, endpoint, nodeDeployment)) {
    throw new AppError("model_not_in_plan", {
      param: "model",
      message: `This key's plan does not include the ${endpoint} endpoint.`,
    });
  }
  if (!grantsModel(auth, modelId)) {
    throw new AppError("model_not_in_plan", { param: "model", message: `This key may not use the model '${modelId}'.` });
  }
}

/**
 * 403 model_not_in_plan (param "model") unless the key and its plan grant the model through one of `endpoints` (the
 * endpoints the model serves): for what any caller of the model may do, such as tokenizing with its tokenizer.
 */
export function assertGrantedAny(auth: AuthContext, endpoints: readonly Endpoint[], modelId: string, nodeDeployment: string): void {
  const granted = endpoints.find((endpoint) => grantsEndpoint(auth, endpoint, nodeDeployment));
  if (granted === undefined) {
    throw new AppError("model_not_in_plan", {
      param: "model",
      message: `This key's plan includes none of the endpoints of the model '${modelId}' (${endpoints.join(", ")}).`,
    });
  }
  assertGranted(auth, granted, modelId, nodeDeployment);
}

/** The key scopes (endpoints) through which a model with these capabilities is called. */
function servedEndpoints(capabilities: readonly Capability[]): Endpoint[] {
  return capabilities.filter((c): c is Endpoint & Capability => c === "chat" || c === "embeddings" || c === "rerank" || c === "transcriptions");
}

/**
 * The grant check of one request on a model or route: through the request's own endpoint (`grantedBy` endpoint, the
 * default), or through any endpoint the model serves (`model`: its tokenizer answers a key of any of them).
 */
export function assertGrantedBy(
  auth: AuthContext,
  grantedBy: "endpoint" | "model" | undefined,
  endpoint: Endpoint,
  model: { id: string; capabilities: readonly Capability[] },
  nodeDeployment: string,
): void {
  if (grantedBy === "model") assertGrantedAny(auth, servedEndpoints(model.capabilities), model.id, nodeDeployment);
  else assertGranted(auth, endpoint, model.id, nodeDeployment);
}
