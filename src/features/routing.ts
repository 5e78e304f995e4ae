import type { AppContext } from "../app-context.ts";
import { assertGrantedBy, grantsModel } from "../auth/key-grants.ts";
import type { FallbackReason } from "../config/app-config.ts";
import type { ModelRoute } from "../catalog/model-route.ts";
import { checkCapabilities, type LimitedInput } from "../engines/capabilities.ts";
import type { ChatRequest, CompletionRequest, EnginePort } from "../engines/engine.ts";
import { conversationKey } from "../engines/upstream/affinity-key.ts";
import { UpstreamUnavailable } from "../engines/upstream/upstream-errors.ts";
import { AppError } from "../errors/app-error.ts";
import type { ModelRunner } from "../scheduler/model-runner.ts";
import type { RequestContext } from "./request-context.ts";

/*
 * Routes (issue 45, docs/routing.md): the one place a requested model id becomes the catalog entries that serve it,
 * above admission. `runInference` and `prepareInference` (inference.ts) call it, so every endpoint and every front
 * door that goes through them is routed: it picks a target, admits there, and on a failure the route allows, the
 * attempt's slot and token reservation are released before the next target admits the request.
 */

/** The entries a request tries, in order, and the route the client named (null: it named an entry). */
export interface RoutePlan {
  route: ModelRoute | null;
  targets: readonly string[];
}

/**
 * What a request puts to a route: the model it names, the port it needs, what grants it (see `Inference`), the
 * request for the capability check, and its input (for the sticky split).
 */
export interface Routable {
  model: string;
  port: EnginePort;
  grantedBy?: "endpoint" | "model";
  chat?: ChatRequest;
  completion?: CompletionRequest;
  input: LimitedInput;
}

/**
 * The targets for `spec.model`. An entry is its own single target (its checks are the caller's). A route is checked
 * as a model first: the key may name it (403), and it serves what the request needs (400, its shared
 * capabilities); then its weighted pick for the account and conversation and its fallbacks, keeping only the
 * entries the key may name itself (403 when none is left): a route never reaches an entry its caller could not.
 */
export function planRoute(ctx: AppContext, request: RequestContext, spec: Routable): RoutePlan {
  const route = ctx.catalog.route(spec.model);
  if (!route) return { route: null, targets: [spec.model] };
  if (request.outcome) request.outcome.route = route.id;
  assertGrantedBy(request.auth, spec.grantedBy, request.endpoint, { id: route.id, capabilities: route.config.capabilities }, ctx.config.deployment);
  const targets = route.attempts(
    () => stickyPoint(request.auth.accountId, spec.input),
    (model) => grantsModel(request.auth, model),
  );
  if (targets.length === 0) throw noTargetFor(route);
  checkCapabilities(route.asModel.entry, route.asModel.support, spec.port, spec.chat ?? spec.completion);
  // From here on, an answer (an error from the first target's checks included) says which target it came from.
  announce(request, route, targets[0], 0);
  return { route, targets };
}

/** 403 for a key allowed a route but none of its models. */
export function noTargetFor(route: ModelRoute): AppError {
  return new AppError("model_not_in_plan", { param: "model", message: `This key may use none of the models of the route '${route.id}'.` });
}

/**
 * Where a request lands in a weighted split: a hash of its account and, for chat, its conversation (the messages up
 * to the first user message, which every later turn keeps), so every turn of a conversation goes to one target and
 * keeps its cached prefix there. A legacy completion's conversation is its document: the opening of its (first)
 * prompt, which a code-completion client keeps while the text after it changes, so one document's completions stay
 * on one target too. Other endpoints have no conversation: an account's requests stay on one target, so the vectors
 * of one account's index come from one model.
 */
function stickyPoint(account: string, input: LimitedInput): number {
  if (input.kind === "completions") return conversationKey([{ role: "user", content: input.prompts[0].slice(0, documentOpeningChars) }], account);
  return conversationKey(input.kind === "chat" ? input.req.messages : [], account);
}

/** How much of a completion's prompt identifies its document for the sticky split. */
const documentOpeningChars = 256;

/**
 * Runs `attempt` at each target in turn until one answers. A failure moves on only when the route allows its reason,
 * another target is left, the request is not aborted, and nothing of the answer has gone to the client; otherwise
 * it is the request's error. Each attempt gets its own signal: the target's requestTimeout, less the time the
 * earlier attempts took. `served` (runs, not prepare-only counts) records which target answered. A model that is
 * not a route is its one attempt, with no async step of its own.
 */
export function inTurn<T>(
  ctx: AppContext,
  request: RequestContext,
  plan: RoutePlan,
  attempt: (runner: ModelRunner, signal: AbortSignal, index: number) => Promise<T>,
  served = true,
): Promise<T> {
  if (plan.route) return onRoute(ctx, request, plan, attempt, served);
  const runner = ctx.catalog.get(plan.targets[0]);
  return attempt(runner, request.signalFor(Math.max(1, runner.entry.requestTimeoutMs)), 0);
}

async function onRoute<T>(
  ctx: AppContext,
  request: RequestContext,
  plan: RoutePlan,
  attempt: (runner: ModelRunner, signal: AbortSignal, index: number) => Promise<T>,
  served: boolean,
): Promise<T> {
  const { route, targets } = plan;
  const started = performance.now();
  for (let index = 0; ; index++) {
    const runner = ctx.catalog.get(targets[index]);
    if (route && index > 0) announce(request, route, runner.entry.id, index);
    const signal = request.signalFor(Math.max(1, runner.entry.requestTimeoutMs - (index === 0 ? 0 : performance.now() - started)));
    try {
      const result = await attempt(runner, signal, index);
      if (route && served) {
        route.recordServed(runner.entry.id);
        ctx.metrics.routeServed(route.id, runner.entry.id);
      }
      return result;
    } catch (err) {
      const reason = route && index + 1 < targets.length && !signal.aborted && !request.responseStarted?.() ? fallbackReason(err, runner) : null;
      if (!route || !reason || !route.fallsBackOn(reason)) throw err;
      route.recordFallback(runner.entry.id, reason);
      ctx.metrics.routeFallback(route.id, runner.entry.id, reason);
      request.outcome?.fallbackReasons.push(reason);
      request.log.debug({ route: route.id, from: runner.entry.id, to: targets[index + 1], reason }, "route: falling back");
    }
  }
}

/**
 * The target an attempt runs on (or, for a cache hit, the target that generated the entry), where the answer and the
 * access line say so: the header, `target`, the outcome.
 */
export function announce(request: RequestContext, route: ModelRoute, target: string, fallbacks: number): void {
  request.target = target;
  request.setHeaders?.({ "x-modelgate-route": `${route.id}; target=${target}; fallbacks=${fallbacks}` });
}

/**
 * Why a failed attempt may move on, or null when it never does: a 4xx of the request itself (bad parameters, limits,
 * a refusal), our own 429s (the key's limits would refuse it anywhere), an unexpected error. The prompt not fitting
 * the target's window is `context_window`; the target not able to serve (not loaded, files missing, load failed,
 * every upstream down or ejected) is `unavailable`; a full queue or deadline, or an upstream's 429 or 503, is
 * `overloaded`; an upstream's other 5xx, network error or timeout is `upstream_error`.
 */
function fallbackReason(err: unknown, runner: ModelRunner): FallbackReason | null {
  if (!(err instanceof AppError)) return null;
  switch (err.code) {
    case "context_length_exceeded":
      return "context_window";
    case "model_loading":
      return "unavailable";
    case "model_not_found":
    case "internal_error":
      return runner.state === "missing" || runner.state === "failed" ? "unavailable" : null;
    case "overloaded":
      if (!(err instanceof UpstreamUnavailable)) return "overloaded";
      if (err.upstreamStatus === 429 || err.upstreamStatus === 503) return "overloaded";
      return (runner.stats().upstreams ?? []).every((u) => u.state !== "healthy") ? "unavailable" : "upstream_error";
    default:
      return null;
  }
}
