import type { AppConfig, Plan } from "./config/app-config.ts";
import type { ModelCatalog } from "./catalog/model-catalog.ts";
import type { OpenStreams } from "./http/sse.ts";
import type { Metrics } from "./metrics/metrics.ts";
import type { UsageSink } from "./store/usage-sink.ts";

/** Everything a route or service needs from the running server; decorated on the app as `app.ctx`. */
export interface AppContext {
  config: AppConfig;
  catalog: ModelCatalog;
  usage: UsageSink;
  /** Streams with their response begun; a shutdown past its timeout ends them with an error event. */
  streams: OpenStreams;
  /** The Prometheus metrics (GET /metrics). */
  metrics: Metrics;
  /** The plans' maxConcurrent and maxConcurrentPerAccount (shared by the replicas through Redis when configured). */
  concurrency: ConcurrencyLimits;
  /** Token limits, quotas and budgets (issue 32): reserved at admission, settled after the run. */
  tokens: TokenGate;
  /** The exact-match response cache's store (issue 45): Redis when configured, else this process's memory. */
  responseCache: ResponseCache;
  /** Called on shutdown, in reverse order of registration. */
  onClose(fn: () => Promise<void> | void): void;
}

declare module "fastify" {
  interface FastifyInstance {
    /** Decorated by server.ts. */
    ctx: AppContext;
  }
}

/** Who holds a concurrency slot: the key, its account, and the plan's two limits (null = unlimited). */
export interface ConcurrencyHolder {
  keyId: string;
  accountId: string;
  plan: { name: string; maxConcurrent: number | null; maxConcurrentPerAccount: number | null };
}

/**
 * The plans' `maxConcurrent` (per key) and `maxConcurrentPerAccount`: requests running plus queued, over every
 * model. Over either limit, 429 rate_limit_exceeded: it is the key's or plan's limit (§7), not the model's capacity.
 * In memory on one node (plugins/concurrency-limits.ts), or shared by the replicas in Redis
 * (plugins/rate-limit/redis-concurrency.ts).
 */
export interface ConcurrencyLimits {
  /**
   * Counts one request in and gives its release (call exactly once when it ends); throws (or rejects with) 429 over
   * a limit. The release comes at once when nothing has to be asked (no limit, or the count is this node's alone),
   * so a request that waits for nothing takes no async step here.
   */
  acquire(holder: ConcurrencyHolder): (() => void) | Promise<() => void>;
}

/** Who a metered request is for. */
export interface MeterSubject {
  keyId: string;
  accountId: string;
  plan: Plan;
}

/** Tokens a request reserves (its prompt and its completion cap) or used. */
export interface TokenAmount {
  promptTokens: number;
  completionTokens: number;
}

/** A reservation taken at admission; `settle` is called once, after the run, with what was used (null: nothing). */
export interface TokenReservation {
  /**
   * The UTC day (YYYY-MM-DD) the reservation was counted in. The request's usage is recorded on that day, so that a
   * day's quota and budget counters equal its usage rows when a request runs past midnight.
   */
  readonly day: string;
  settle(used: TokenAmount | null): Promise<void>;
}

/**
 * The token meter (plugins/token-meter.ts), usable by any caller of runInference (HTTP or not): the rate-limit
 * headers are handed to `setHeaders`, which an HTTP route puts on its reply and another caller may ignore.
 */
export interface TokenGate {
  /**
   * The `x-ratelimit-*-tokens` headers of the key's token windows without reserving; null at once (nothing to wait
   * for) when its plan has none.
   */
  headers(subject: MeterSubject): Promise<Record<string, string>> | null;
  /**
   * Reserves `amount` in the key's and account's token windows, the account's quota and its budget, in all or none
   * (429 rate_limit_exceeded naming what is spent, with Retry-After); null at once (nothing to wait for) when the
   * plan meters nothing.
   */
  reserve(subject: MeterSubject, model: string, amount: TokenAmount, setHeaders?: (headers: Record<string, string>) => void): Promise<TokenReservation | null> | null;
}

/**
 * The response cache's store (plugins/response-cache): JSON values under a key within a model, compressed, each
 * living its own TTL; shared by the replicas through Redis when configured. Reads and writes never fail a request:
 * a store that cannot answer says `unavailable`, and the request goes on without the cache.
 */
export interface ResponseCache {
  /** The value under `key`, null when there is none, `unavailable` when the store cannot answer now. */
  get(model: string, key: string, maxBytes: number): Promise<unknown | null | "unavailable">;
  /**
   * Stores `value` for `ttlMs` unless its JSON is larger than `maxBytes` (false then). The write is issued before
   * this returns, so a later `get` on this node sees it; a failed write is the store's to count.
   */
  put(model: string, key: string, value: unknown, ttlMs: number, maxBytes: number): boolean;
  /** Removes the entries of `model` (every model's when null), on every replica's shared store; resolves to how many. */
  purge(model: string | null): Promise<number>;
}
