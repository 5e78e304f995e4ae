import type { AppContext, TokenAmount, TokenReservation } from "../app-context.ts";
import { assertGranted } from "../auth/key-grants.ts";
import type { Endpoint } from "../config/config.schema.ts";
import { checkCapabilities, checkInputLimits, portOf, type LimitedInput } from "../engines/capabilities.ts";
import { isClientDisconnect } from "../errors/aborts.ts";
import type { ChatRequest, EndpointCapability, EndpointPorts } from "../engines/engine.ts";
import type { Lease } from "../scheduler/runner-types.ts";
import type { RequestContext } from "./request-context.ts";
import { currentContext, incomingContext, inSpan, SpanKind, startSpan } from "../telemetry/spans.ts";
import type { Span } from "@opentelemetry/api";

export interface Inference<E extends EndpointCapability, P, R> {
  model: string;
  /** The endpoint whose port does the work: the capability check is for it, and prepare and run get it. */
  port: E;
  /** The chat request, for the feature part of the capability check. */
  chat?: ChatRequest;
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
 * context_length_exceeded) → admit (503) → run → release, and the usage is recorded for the key.
 */
export async function runInference<E extends EndpointCapability, P, R>(ctx: AppContext, request: RequestContext, spec: Inference<E, P, R>): Promise<R> {
  const operation = operationNames[request.endpoint] ?? request.endpoint;
  const attributes = { "gen_ai.operation.name": operation, "gen_ai.request.model": spec.model, ...chatAttributes(spec.chat) };
  return inSpan(`${operation} ${spec.model}`, attributes, async (span) => {
    const runner = checkRequest(ctx, request, spec);
    const signal = request.signalFor(runner.entry.requestTimeoutMs);
    const traceContext = currentContext();
    // The wait for a slot: from the end of prepare to the start of the work (or to the refusal, when admission fails).
    let waiting: Span | null = null;
    let queuedAt = 0;
    const endWait = () => {
      waiting?.end();
      waiting = null;
    };
    // Issue 32: reserved between prepare and admit, settled after the run in every case (to the usage recorded, or 0).
    let reservation: TokenReservation | null = null;
    let used: TokenAmount | null = null;
    let result: R;
    // Fair share: the lease to charge the rest of the usage to, once it is known.
    let held = null as Lease | null;
    const releaseConcurrency = await ctx.concurrency.acquire(request.auth);
    try {
      result = await runner.execute({
        queueKey: request.auth.keyId,
        account: request.auth.accountId,
        weight: request.auth.plan.weight,
        priority: request.priority ?? request.auth.plan.priority,
        signal,
        slots: spec.slots,
        onQueued: spec.onQueued,
        // Methods, not arrow properties: under tsx (keepNames) each named closure costs a defineProperty per request.
        cost(prepared) {
          return spec.promptTokens?.(prepared) ?? 0;
        },
        prepare(engine, prepareSignal) {
          return inSpan("prepare", {}, async () => {
            const prepared = await spec.prepare(portOf(engine, spec.port), prepareSignal);
            const amount = spec.reservation ? spec.reservation(prepared) : defaultReservation(prepared, spec.input, runner.entry.contextSize);
            reservation = await ctx.tokens.reserve(request.auth, spec.model, amount, request.setHeaders);
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
    } finally {
      releaseConcurrency();
      endWait();
      // Not awaited: the answer does not wait for it, and a late settle only gives tokens back (never over-admits);
      // Redis runs this node's commands in order, so its next request sees it.
      void settle(reservation, used, request);
      if (signal.aborted && isClientDisconnect(signal.reason)) request.log.debug({ model: spec.model }, "client disconnected; the request was stopped");
    }
    const usage = used;
    if (usage) {
      held?.charge(usage.promptTokens + usage.completionTokens - held.charged);
      span.setAttributes({ "gen_ai.usage.input_tokens": usage.promptTokens, "gen_ai.usage.output_tokens": usage.completionTokens });
      ctx.usage.record({ keyId: request.auth.keyId, accountId: request.auth.accountId, model: spec.model, endpoint: request.endpoint, ...usage, batch: request.priority === "batch" });
      ctx.metrics.tokens(spec.model, request.auth.accountId, usage.promptTokens, usage.completionTokens);
      if (request.outcome) Object.assign(request.outcome, { promptTokens: usage.promptTokens, completionTokens: usage.completionTokens });
    }
    return result;
  }, SpanKind.SERVER, incomingContext(request.headers));
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
function defaultReservation(prepared: unknown, input: LimitedInput, contextSize: number | null): TokenAmount {
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
    case "transcriptions":
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
export async function prepareInference<E extends EndpointCapability, P>(
  ctx: AppContext,
  request: RequestContext,
  spec: Pick<Inference<E, P, never>, "model" | "port" | "chat" | "input" | "prepare">,
): Promise<{ prepared: P; contextSize: number | null }> {
  const runner = checkRequest(ctx, request, spec);
  return runner.prepareOnly(request.signalFor(runner.entry.requestTimeoutMs), (engine, signal) => spec.prepare(portOf(engine, spec.port), signal));
}

/** 404 → 403 → 400 (capabilities) → 400 (input limits), in the decisions.md order; returns the model's runner. */
function checkRequest(ctx: AppContext, request: RequestContext, spec: Pick<Inference<EndpointCapability, unknown, unknown>, "model" | "port" | "chat" | "input">) {
  const runner = ctx.catalog.get(spec.model);
  // Only a configured model becomes a label: a client's unknown model name would make the series unbounded.
  if (request.outcome) request.outcome.model = spec.model;
  assertGranted(request.auth, request.endpoint, spec.model, ctx.config.deployment);
  checkCapabilities(runner.entry, runner.support, spec.port, spec.chat);
  checkInputLimits(runner.entry, spec.input);
  return runner;
}
