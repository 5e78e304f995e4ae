import type { Engine, PromptCacheStats, ShareStanding, UpstreamStats } from "../engines/engine.ts";
import type { Priority, TenantView } from "./vtc-queue.ts";

/** What the scheduler's callers and observers see of it: a job, its lease, a runner's stats and events. */
export type { Priority } from "./vtc-queue.ts";

export type LoadState = "missing" | "unloaded" | "loading" | "ready" | "failed";

export interface RunnerStats {
  id: string;
  state: LoadState;
  queueDepth: number;
  /** Slots in use (a request may hold several). */
  active: number;
  parallel: number;
  /** Requests in the bounded prepare stage (engines whose prepare is costly). */
  preparing: number;
  error: string | null;
  /** For engines that forward to other servers: each upstream's health and load. */
  upstreams?: UpstreamStats[];
  /** For engines that reuse cached prompt prefixes: prompt tokens run and how many came from the cache. */
  promptCache?: PromptCacheStats;
  /** The queue by account, and each account's share of the service over the last minute. */
  tenants: TenantStats[];
}

/** One account's place in a model's queue and its share of the model's service. */
export interface TenantStats extends TenantView {
  /** Tokens served to the account over the last minute (prompt + completion). */
  tokensLastMinute: number;
  /** Its part of all the tokens the model served over the last minute (0..1). */
  shareLastMinute: number;
}

/** Why a request got 503 overloaded: the queue was full, it could not start within maxQueueWait, or the request's own deadline. */
export type RefusalReason = "queue_full" | "deadline" | "no_capacity";

/** Scheduler events for metrics (src/metrics): queue waits, loads and unloads. */
export interface RunnerObserver {
  queueWait(model: string, seconds: number, priority: Priority): void;
  /** A 503 overloaded, by reason. */
  refused(model: string, reason: RefusalReason): void;
  /** Tokens charged to an account's share of the model (prompt at admission, completion as generated). */
  served(model: string, account: string, priority: Priority, tokens: number): void;
  loaded(model: string, seconds: number, ok: boolean): void;
  unloaded(model: string): void;
}

/**
 * Slots of the model's `parallel` capacity held by one request; release exactly once when the work ends. Its
 * standing (`overShare`) says whether the request now runs over its account's share: batch work while interactive
 * work runs, or an account running more than its weighted part of `parallel`.
 */
export interface Lease extends ShareStanding {
  engine: Engine;
  slots: number;
  /** Charges tokens of service to the request's account (completion tokens as they are generated). */
  charge(tokens: number): void;
  /** The tokens charged so far (the usage at the end charges the rest). */
  readonly charged: number;
  release(): void;
}

/**
 * One inference request as the scheduler runs it: prepare → admit → run → release. The runner owns every step
 * but the work itself, so no service or engine holds capacity of its own.
 */
export interface Job<P, R> {
  /** The API key id. */
  queueKey: string;
  /** The fairness key: the account (default: queueKey). */
  account?: string;
  /** The account's plan weight (default 1): its share of a saturated model is proportional to it. */
  weight?: number;
  /** Default interactive; batch gets only the capacity interactive work leaves. */
  priority?: Priority;
  /** Tokens charged to the account when it is admitted (the prepared prompt's tokens). */
  cost?(prepared: P): number;
  /** The request's signal: a disconnect or the deadline aborts the wait and the work. */
  signal: AbortSignal;
  /** Templates, tokenizes and validates on the loaded engine; its 400s come before any capacity is taken. */
  prepare(engine: Engine, signal: AbortSignal): P | Promise<P>;
  /** How many slots the work can use at once (default 1); it is given between 1 and that many. */
  slots?(prepared: P): number;
  /** Called when the job has to wait for a slot (a stream starts its keep-alive comments then). */
  onQueued?(): void;
  /** The work, on the leased slot(s), under the request's signal. */
  run(engine: Engine, prepared: P, lease: Lease): Promise<R>;
}
