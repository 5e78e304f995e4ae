import { createHash } from "node:crypto";
import type { AppContext, TokenAmount } from "../app-context.ts";
import { assertGranted, grantsModel } from "../auth/key-grants.ts";
import type { ModelEntry } from "../config/app-config.ts";
import { checkCapabilities, checkInputLimits } from "../engines/capabilities.ts";
import type { ChatDelta, ChatRequest, EngineSupport, FinishReason } from "../engines/engine.ts";
import type { ModelRoute } from "../catalog/model-route.ts";
import type { RequestContext } from "./request-context.ts";
import { announce, noTargetFor } from "./routing.ts";

/*
 * The exact-match response cache (issue 45, docs/routing.md#response-cache): which generation requests it answers,
 * under which key, and what a hit costs. It sits above routing and admission: a hit takes no slot and runs no
 * engine, but it meets every refusal a miss would meet first (the key's grants, the capability and input checks,
 * and the token limits, quota and budget, which a hit reserves exactly as its miss did).
 */

/** What `x-modelgate-cache` says: answered from an entry, looked up and not found, or not looked up. */
export type CacheStatus = "hit" | "miss" | "bypass";

/** The output events of a generation, without its `done`. */
export type CachedDelta = Exclude<ChatDelta, { type: "done" }>;

/** A stored generation: enough to replay it in any front door's wire format, streamed or not. */
export interface CachedGeneration {
  v: typeof entryVersion;
  /** When it was written (ms since the epoch): a plan's shorter ttl is checked against it. */
  at: number;
  /** The output in the events it was streamed as (one per generated piece when the miss was not streamed). */
  deltas: CachedDelta[];
  finishReason: FinishReason;
  /** The stop string that ended it, when the engine said. */
  stopSequence?: string;
  usage: TokenAmount;
  /** What the miss reserved at admission (its prompt and completion cap): a hit reserves the same. */
  reserved: TokenAmount;
  /** The catalog entry that generated it: a hit is recorded and charged at its prices. */
  servedBy: string;
}

/** What the cache does for one request: the hit to replay, or where a miss writes its answer (null: nowhere). */
export interface CacheDecision {
  status: CacheStatus;
  hit: CachedGeneration | null;
  save: ((entry: Omit<CachedGeneration, "v" | "at">) => void) | null;
}

/** Bumped when the entry's shape or the key's recipe changes: older entries are then never read. */
const entryVersion = 1;

/**
 * The cache's answer for a generation request, or null when it does not apply (the model or the plan has no
 * `cache`): then nothing is read or written and the answer has no `x-modelgate-cache` header. A hit has been
 * charged (usage, token limits) when this returns; the caller only replays it. Null comes at once (no async step).
 */
export function consultCache(ctx: AppContext, request: RequestContext, model: string, req: ChatRequest): Promise<CacheDecision | null> | null {
  const target = cachedModel(ctx, model);
  const planCache = request.auth.plan.cache;
  if (!target?.entry.cache || !planCache) return null;
  return consultEntry(ctx, request, model, req, { ...target, cache: target.entry.cache }, planCache);
}

type CachedTarget = NonNullable<ReturnType<typeof cachedModel>> & { cache: NonNullable<ModelEntry["cache"]> };

async function consultEntry(ctx: AppContext, request: RequestContext, model: string, req: ChatRequest, target: CachedTarget, planCache: NonNullable<RequestContext["auth"]["plan"]["cache"]>): Promise<CacheDecision> {
  // The refusals a miss meets before it runs, in its order: a key that may not ask this never reads an entry.
  assertGranted(request.auth, request.endpoint, model, ctx.config.deployment);
  if (target.route && !target.route.reachable((m) => grantsModel(request.auth, m))) throw noTargetFor(target.route);
  checkCapabilities(target.entry, target.support, "chat", req);
  checkInputLimits(target.entry, { kind: "chat", req });
  const modelCache = target.cache;
  const ttlMs = Math.min(modelCache.ttlMs, planCache.ttlMs ?? Infinity);
  const maxEntryBytes = Math.min(modelCache.maxEntryBytes, planCache.maxEntryBytes ?? Infinity);
  if (!deterministic(req, target.entry, target.support)) return decided(ctx, request, model, { status: "bypass", hit: null, save: null });

  const directives = cacheControl(request.headers["cache-control"]);
  const key = cacheKey(model, modelCache.shared ? null : request.auth.accountId, req);
  const save: CacheDecision["save"] = directives.noStore
    ? null
    : (entry) => {
        if (!ctx.responseCache.put(model, key, { v: entryVersion, at: Date.now(), ...entry }, ttlMs, maxEntryBytes)) request.log.debug({ model }, "response cache: the answer is over maxEntryBytes; not stored");
      };
  if (directives.noCache) return decided(ctx, request, model, { status: "bypass", hit: null, save });
  // Read within the model's bound: a plan's lower maxEntryBytes limits what its requests store, not what they read.
  const found = await ctx.responseCache.get(model, key, modelCache.maxEntryBytes);
  // The store is away: no entry is read or written until it answers again (it logged that once).
  if (found === "unavailable") return decided(ctx, request, model, { status: "bypass", hit: null, save: null });
  const hit = validEntry(found, ttlMs);
  // A route's entry answers only a key that may name the target that generated it (plans and scopes change).
  if (!hit || (target.route && !grantsModel(request.auth, hit.servedBy))) return decided(ctx, request, model, { status: "miss", hit: null, save });
  if (target.route) {
    if (request.outcome) request.outcome.route = target.route.id;
    announce(request, target.route, hit.servedBy, 0);
  }
  await chargeHit(ctx, request, hit, planCache.charge);
  return decided(ctx, request, model, { status: "hit", hit, save: null });
}

/**
 * The catalog entry whose `cache` applies to the model the client named, with its engine's support. A route
 * (issue 45.1) is cached by its own `cache`, under its own id, as the capability check sees it: what every target
 * shares (a seed is deterministic only when every target repeats a seeded run).
 */
function cachedModel(ctx: AppContext, model: string): { entry: ModelEntry; support: EngineSupport; route: ModelRoute | null } | undefined {
  const route = ctx.catalog.route(model);
  if (route) return { ...route.asModel, route };
  const runner = ctx.catalog.find(model);
  return runner && { entry: runner.entry, support: runner.support, route: null };
}

/** `temperature` 0 (the request's, else the model's default), or a `seed` on an engine that repeats a seeded run. */
function deterministic(req: ChatRequest, entry: ModelEntry, support: EngineSupport): boolean {
  if ((req.temperature ?? entry.defaults.temperature ?? null) === 0) return true;
  return req.seed !== null && support.seededSampling === true;
}

/** `Cache-Control: no-cache` (do not answer from the cache) and `no-store` (do not store this answer). */
function cacheControl(header: string | string[] | undefined): { noCache: boolean; noStore: boolean } {
  const directives = new Set(
    (Array.isArray(header) ? header.join(",") : (header ?? ""))
      .split(",")
      .map((d) => d.trim().toLowerCase())
      .filter(Boolean),
  );
  return { noCache: directives.has("no-cache"), noStore: directives.has("no-store") };
}

/**
 * The key: the model the client named, the account (none when the model's entries are shared) and the prepared
 * request as the engine gets it, every field in its order (a tool schema's key order changes the prompt, so it is
 * part of the request); images by their SHA-256. `buffered` (whether the answer is streamed) is not: a streamed
 * request and a non-streamed one share their entry.
 */
export function cacheKey(model: string, account: string | null, req: ChatRequest): string {
  const hash = createHash("sha256").update(JSON.stringify([entryVersion, model, account ?? "*"]));
  hash.update(
    JSON.stringify(req, function (this: unknown, name, value: unknown) {
      if (this === req && name === "buffered") return undefined;
      return value instanceof Uint8Array ? `sha256:${createHash("sha256").update(value).digest("hex")}` : value;
    }),
  );
  return hash.digest("base64url");
}

/** A stored value that is an entry of this version and younger than `ttlMs` (a plan may shorten the model's ttl). */
function validEntry(found: unknown, ttlMs: number): CachedGeneration | null {
  const entry = found as CachedGeneration | null;
  if (!entry || entry.v !== entryVersion || !Array.isArray(entry.deltas) || typeof entry.at !== "number") return null;
  return Date.now() - entry.at <= ttlMs ? entry : null;
}

/**
 * A hit meets the token limits, quota and budget as its miss did: it reserves what the miss reserved (429 when a
 * miss would have been refused), then settles to nothing (`charge: none`) or to the answer's tokens (`full`). It
 * is recorded in usage as a request answered from the cache, with the tokens it was charged.
 */
async function chargeHit(ctx: AppContext, request: RequestContext, hit: CachedGeneration, charge: "none" | "full"): Promise<void> {
  const reservation = await ctx.tokens.reserve(request.auth, hit.servedBy, hit.reserved, request.setHeaders);
  const charged = charge === "full" ? hit.usage : { promptTokens: 0, completionTokens: 0 };
  reservation?.settle(charge === "full" ? hit.usage : null).catch((err: unknown) => request.log.warn({ err }, "could not settle the token reservation"));
  (request.usage ?? ctx.usage).record({ keyId: request.auth.keyId, accountId: request.auth.accountId, model: hit.servedBy, endpoint: request.endpoint, ...charged, batch: request.priority === "batch", cached: true, day: reservation?.day });
  if (request.outcome) Object.assign(request.outcome, { model: hit.servedBy, ...charged, ttftMs: request.elapsedMs() });
}

/** The header, the access line's `cache` and the metrics, for every request the cache applies to. */
function decided(ctx: AppContext, request: RequestContext, model: string, decision: CacheDecision): CacheDecision {
  request.setHeaders?.({ "x-modelgate-cache": decision.status });
  if (request.outcome) request.outcome.cache = decision.status;
  ctx.metrics.cacheLookup(model, decision.status);
  return decision;
}
