import type { AppContext, TokenAmount, TokenReservation } from "../app-context.ts";
import { assertGrantedBy } from "../auth/key-grants.ts";
import type { Endpoint } from "../config/config.schema.ts";
import { checkCapabilities, checkInputLimits, portOf, type LimitedInput } from "../engines/capabilities.ts";
import { isClientDisconnect } from "../errors/aborts.ts";
import type { ChatRequest, CompletionRequest, EndpointPorts, EnginePort } from "../engines/engine.ts";
import type { ModelRunner } from "../scheduler/model-runner.ts";
import type { Lease } from "../scheduler/runner-types.ts";
import type { RequestContext } from "./request-context.ts";
import { inTurn, planRoute } from "./routing.ts";
import { currentContext, incomingContext, inSpan, SpanKind, startSpan } from "../telemetry/spans.ts";
import type { Span } from "@opentelemetry/api";

export interface Inference<E extends EnginePort, P, R> {
  model: string;
  /** The engine port that does the work: the capability check is for it, and prepare and run get it. */
  port: E;
  /** The chat request, for the feature part of the capability check. */
  chat?: ChatRequest;
  /** A raw-prompt completion, for the same check (one of its choices: they share their features). */
  completion?: CompletionRequest;
  /** `gen_ai.operation.name` when the endpoint's own does not say it (a text completion on a chat key). */
  operation?: string;
  /**
   * Which key scopes grant the request: the route's endpoint (the default), or `model`: any endpoint the model
   * serves (the tokenizer of an embeddings model answers an embeddings key).
   */
  grantedBy?: "endpoint" | "model";
  /** What the request puts in front of the model, for the model's input limits. */
  input: LimitedInput;
  prepare(port: EndpointPorts[E], signal: AbortSignal): P | Promise<P>;
  slots?(prepared: P): number;
  onQueued?(): void;
  /** The prepared prompt's tokens, charged to the account's fair share when it is admitted. */
  promptTokens?(prepared: P): number;
  /** The work; it may charge completion tokens to `lease` as they are generated (the rest is charged from `usage`). */
  run(port: EndpointPorts[E], prepared: P, signal: AbortSignal, lease: Lease): Promise<R>;
  /**
   * What the token meter reserves at admission (issue 32); by default the prepared request's `promptTokens` (an
   * estimate from the input when the engine counted none) and its completion cap `maxTokens` (0 when it has none).
   */
  reservation?(prepared: P): TokenAmount;
  /** The tokens to record for the key, or null to record nothing. */
  usage(result: R): { promptTokens: number; completionTokens: number } | null;
}

/**
 * The skeleton every inference endpoint shares, in the decisions.md order: the model exists (404), the key may use
 * it here (403), it can do what the request asks (400, one check), the inputs are within the model's limits (400),
 * then the scheduler's prepare (400s such as
 * context_length_exceeded) → admit (503) → run → release, and the usage is recorded for the key. A model that is a
 * route (issue 45, routing.ts) runs on its targets in turn: each attempt is admitted at its target, and a failed one
 * gives back its slot and tokens before the next; the usage is the target's that served.
 */
export async function runInference<E extends EnginePort, P, R>(ctx: AppContext, request: RequestContext, spec: Inference<E, P, R>): Promise<R> {
  const operation = spec.operation ?? operationNames[request.endpoint] ?? request.endpoint;
  const attributes = { "gen_ai.operation.name": operation, "gen_ai.request.model": spec.model, ...chatAttributes(spec.chat) };
  return inSpan(`${operation} ${spec.model}`, attributes, async (span) => {
    const plan = planRoute(ctx, request, spec);
    checkRequest(ctx, request, spec, plan.targets[0]);
    const acquired = ctx.concurrency.acquire(request.auth);
    const releaseConcurrency = typeof acquired === "function" ? acquired : await acquired;
    let served: Attempted<R>;
    try {
      served = await inTurn(ctx, request, plan, (runner, signal, index) => {
        const target = index === 0 ? runner : checkRequest(ctx, request, spec, runner.entry.id);
        return attempt(ctx, request, spec, target, signal, index + 1 < plan.targets.length, span);
      });
    } finally {
      releaseConcurrency();
    }
    const { model, result, used: usage, held, day } = served;
    if (plan.route) span.setAttributes({ "gen_ai.response.model": model, "modelgate.route": plan.route.id, "modelgate.route.fallbacks": request.outcome?.fallbackReasons.length ?? 0 });
    if (usage) recordUsage(ctx, request, model, usage, held, span, day);
    return result;
  }, SpanKind.SERVER, incomingContext(request.headers));
}

/**
 * The usage of a request that ran: the rest of its fair-share charge, the usage rows (on `day`, its token
 * reservation's, when it has one), metrics, its trace and log.
 */
function recordUsage(ctx: AppContext, request: RequestContext, model: string, usage: TokenAmount, held: Lease | null, span: Span, day: string | undefined): void {
  held?.charge(usage.promptTokens + usage.completionTokens - held.charged);
  span.setAttributes({ "gen_ai.usage.input_tokens": usage.promptTokens, "gen_ai.usage.output_tokens": usage.completionTokens });
  (request.usage ?? ctx.usage).record({ keyId: request.auth.keyId, accountId: request.auth.accountId, model, endpoint: request.endpoint, ...usage, batch: request.priority === "batch", day });
  ctx.metrics.tokens(model, request.auth.accountId, usage.promptTokens, usage.completionTokens);
  if (request.outcome) Object.assign(request.outcome, { promptTokens: usage.promptTokens, completionTokens: usage.completionTokens });
}

/** What one attempt produced at its target: the result, the usage to record and the lease to charge it to. */
interface Attempted<R> {
  model: string;
  result: R;
  used: TokenAmount | null;
  held: Lease | null;
  /** The UTC day its token reservation was counted in (none: no token limit, quota or budget applies). */
  day: string | undefined;
}

/**
 * One attempt at one catalog entry: prepare → token reservation → admit → run → release. When a route may try
 * another target after it (`more`), a failed attempt settles its reservation to nothing before it throws, so the next
 * target reserves afresh and nothing is held twice.
 */
async function attempt<E extends EnginePort, P, R>(
  ctx: AppContext,
  request: RequestContext,
  spec: Inference<E, P, R>,
  runner: ModelRunner,
  signal: AbortSignal,
  more: boolean,
  span: Span,
): Promise<Attempted<R>> {
  const model = runner.entry.id;
  const traceContext = currentContext();
  // The wait for a slot: from the end of prepare to the start of the work (or to the refusal, when admission fails).
  let waiting: Span | null = null;
  let queuedAt = 0;
  const endWait = () => {
    waiting?.end();
    waiting = null;
  };
  // Issue 32: reserved between prepare and admit, settled after the run in every case (to the usage recorded, or 0).
  let reservation = null as TokenReservation | null;
  let reserved = null as TokenAmount | null;
  let used: TokenAmount | null = null;
  // Fair share: the lease to charge the rest of the usage to, once it is known.
  let held = null as Lease | null;
  let promptCharged = 0;
  try {
    const result = await runner.execute({
      queueKey: request.auth.keyId,
      account: request.auth.accountId,
      weight: request.auth.plan.weight,
      priority: request.priority ?? request.auth.plan.priority,
      signal,
      slots: spec.slots,
      onQueued: spec.onQueued,
      // Methods, not arrow properties: under tsx (keepNames) each named closure costs a defineProperty per request.
      cost(prepared) {
        promptCharged = spec.promptTokens?.(prepared) ?? 0;
        return promptCharged;
      },
      prepare(engine, prepareSignal) {
        return inSpan("prepare", {}, async () => {
          const prepared = await spec.prepare(portOf(engine, spec.port), prepareSignal);
          reserved = spec.reservation ? spec.reservation(prepared) : defaultReservation(prepared, spec.input, runner.entry.contextSize);
          const reserving = ctx.tokens.reserve(request.auth, model, reserved, request.setHeaders);
          reservation = reserving && (await reserving);
          waiting = startSpan("queue wait", {}, traceContext);
          queuedAt = performance.now();
          return prepared;
        });
      },
      run(engine, prepared, lease) {
        endWait();
        if (request.outcome) request.outcome.queueMs = performance.now() - queuedAt;
        held = lease;
        return inSpan("generation", {}, () => spec.run(portOf(engine, spec.port), prepared, signal, lease));
      },
    });
    used = spec.usage(result);
    return { model, result, used, held, day: reservation?.day };
  } catch (err) {
    // Issue 42.2: a client that left once its request was running (before its first token too) is charged its
    // prompt, which the engine was given, and the completion pieces generated before it left; no route falls back
    // after a disconnect.
    if (held && reserved && signal.aborted && isClientDisconnect(signal.reason)) {
      used = { promptTokens: reserved.promptTokens, completionTokens: Math.max(0, held.charged - promptCharged) };
      recordUsage(ctx, request, model, used, held, span, reservation?.day);
    } else if (more) {
      // The reservation moves with the request: given back before a route's next target reserves its own.
      const failed = reservation;
      reservation = null;
      await settle(failed, null, request);
    }
    throw err;
  } finally {
    endWait();
    // Not awaited: the answer does not wait for it, and a late settle only gives tokens back (never over-admits);
    // Redis runs this node's commands in order, so its next request sees it.
    void settle(reservation, used, request);
    if (signal.aborted && isClientDisconnect(signal.reason)) request.log.debug({ model }, "client disconnected; the request was stopped");
  }
}

/** A settle that fails (the shared store down) is logged, never the request's error. */
async function settle(reservation: TokenReservation | null, used: TokenAmount | null, request: RequestContext): Promise<void> {
  if (!reservation) return;
  try {
    await reservation.settle(used);
  } catch (err) {
    request.log.warn({ err }, "could not settle the token reservation");
  }
}

/** Tokens an engine's reservation stands in for when it could not count a prompt: about four characters a token. */
const charsPerToken = 4;
/** The completion cap reserved when nothing bounds a completion (an upstream without a window, no max_tokens or plan cap). */
const unboundedCompletionTokens = 4096;

/**
 * The default reservation: the prepared request's prompt tokens (counted by the model's own tokenizer, or the
 * upstream's `tokenize` setting; an estimate of a token per 4 characters when it counted none) and its completion
 * cap (`maxTokens`: max_tokens, else the plan's maxOutputTokens, else what the context window leaves; the model's
 * contextSize, else 4096, when nothing bounds it).
 */
export function defaultReservation(prepared: unknown, input: LimitedInput, contextSize: number | null): TokenAmount {
  const p = (prepared ?? {}) as { promptTokens?: number; maxTokens?: number };
  const promptTokens = p.promptTokens && p.promptTokens > 0 ? p.promptTokens : estimateTokens(input);
  let completionTokens = p.maxTokens ?? 0;
  if (completionTokens >= Number.MAX_SAFE_INTEGER) completionTokens = contextSize ?? unboundedCompletionTokens;
  return { promptTokens, completionTokens };
}

function estimateTokens(input: LimitedInput): number {
  let chars = 0;
  switch (input.kind) {
    case "chat":
      for (const m of input.req.messages) {
        if (typeof m.content === "string") chars += m.content.length;
        else for (const part of m.content ?? []) if (part.type === "text") chars += part.text.length;
      }
      break;
    case "embeddings":
      for (const text of input.inputs) chars += text.length;
      break;
    case "rerank":
      chars += input.query.length * input.documents.length + input.documents.reduce((n, d) => n + d.length, 0);
      break;
    case "completions":
      for (const prompt of input.prompts) chars += prompt.length + (input.suffix?.length ?? 0);
      break;
    case "transcriptions":
    case "tokenize":
      return 0;
  }
  return Math.ceil(chars / charsPerToken);
}

/** `gen_ai.operation.name` per endpoint: the GenAI conventions' names where they have one. */
const operationNames: Partial<Record<Endpoint, string>> = { chat: "chat", embeddings: "embeddings", rerank: "rerank", transcriptions: "transcription" };

function chatAttributes(chat: ChatRequest | undefined): Record<string, number> {
  if (!chat) return {};
  return {
    ...(chat.maxTokens !== null ? { "gen_ai.request.max_tokens": chat.maxTokens } : {}),
    ...(chat.temperature !== null ? { "gen_ai.request.temperature": chat.temperature } : {}),
    ...(chat.topP !== null ? { "gen_ai.request.top_p": chat.topP } : {}),
    ...(chat.seed !== null ? { "gen_ai.request.seed": chat.seed } : {}),
  };
}

/**
 * The same checks and prepare step as `runInference`, and nothing after it: for /v1/tokenize, which answers what
 * the engine counted (and its context window) without taking a slot or recording usage.
 */
export async function prepareInference<E extends EnginePort, P>(
  ctx: AppContext,
  request: RequestContext,
  spec: Pick<Inference<E, P, never>, "model" | "port" | "chat" | "input" | "prepare" | "grantedBy">,
): Promise<{ prepared: P; contextSize: number | null }> {
  const plan = planRoute(ctx, request, spec);
  checkRequest(ctx, request, spec, plan.targets[0]);
  const counted = await inTurn(
    ctx,
    request,
    plan,
    (runner, signal, index) => (index === 0 ? runner : checkRequest(ctx, request, spec, runner.entry.id)).prepareOnly(signal, (engine, s) => spec.prepare(portOf(engine, spec.port), s)),
    false,
  );
  // A route's window is its largest target's (a prompt too long for one target goes on to the next).
  return plan.route?.config.contextSize ? { prepared: counted.prepared, contextSize: Math.max(plan.route.config.contextSize, counted.contextSize ?? 0) } : counted;
}

/** What the checks read of a request. */
type Checked = Pick<Inference<EnginePort, unknown, unknown>, "model" | "port" | "chat" | "completion" | "input" | "grantedBy">;

/**
 * 404 → 403 → 400 (capabilities) → 400 (input limits), in the decisions.md order, for the catalog entry `model` (a
 * route's target, or the model the client named); returns its runner.
 */
function checkRequest(ctx: AppContext, request: RequestContext, spec: Checked, model: string) {
  const runner = ctx.catalog.get(model);
  // Only a configured model becomes a label: a client's unknown model name would make the series unbounded.
  if (request.outcome) request.outcome.model = model;
  assertGrantedBy(request.auth, spec.grantedBy, request.endpoint, runner.entry, ctx.config.deployment);
  checkCapabilities(runner.entry, runner.support, spec.port, spec.chat ?? spec.completion);
  checkInputLimits(runner.entry, spec.input);
  return runner;
}
