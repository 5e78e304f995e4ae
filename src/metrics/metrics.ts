import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { Priority, RefusalReason, RunnerStats } from "../scheduler/runner-types.ts";
import { registerAfterGcGauges, registerWorkerHeapGauges } from "./after-gc.ts";
import { cachedSeries, CountedSeriesSet, type CountedSeries } from "./counted-series.ts";

/** Seconds: from 5 ms to 10 min, for request durations and queue waits. */
const durationBuckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
/** Seconds: time to first token, 1 ms to 1 min. */
const ttftBuckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** Seconds between two streamed tokens, 0.1 ms to 2.5 s. */
const itlBuckets = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
/** Tokens per second of one generation. */
const rateBuckets = [1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000];
/** What the metrics read at scrape time: the catalog. */
export interface MetricsSource {
  stats(): RunnerStats[];
  takeUpstreamLatencies(): { model: string; upstream: string; seconds: number[] }[];
}

const loadStates = ["missing", "unloaded", "loading", "ready", "failed"] as const;
const upstreamStates = ["healthy", "ejected", "probing"] as const;
const affinityPlacements = ["owner", "spill", "retry"] as const;

/**
 * Every Prometheus metric the node exports, in its own registry (prom-client's default metrics included). Label
 * sets are bounded: endpoint, model, status, code, plan, outcome, upstream URL; never key or request ids, and the
 * account only with `metrics.perAccount`. Scheduler and upstream gauges are read from the catalog at scrape time.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly requests: Counter<"endpoint" | "model" | "status" | "code">;
  readonly requestDuration: Histogram<"endpoint" | "model">;
  readonly ttft: Histogram<"model">;
  readonly interToken: Histogram<"model">;
  readonly promptTokens: Counter<"model" | "account">;
  readonly completionTokens: Counter<"model" | "account">;
  readonly generationRate: Histogram<"model">;
  readonly queueWait: Histogram<"model" | "priority">;
  readonly overloaded: Counter<"model" | "reason">;
  readonly service: Counter<"model" | "priority" | "account">;
  readonly loads: Counter<"model" | "outcome">;
  readonly unloads: Counter<"model">;
  readonly loadDuration: Histogram<"model">;
  readonly rateLimit: Counter<"plan" | "outcome">;
  readonly anonymousLimit: Counter<"outcome">;
  readonly tooLarge: Counter<"endpoint">;
  /** Issue 45: generation requests the response cache applied to, by the model named and hit, miss or bypass. */
  readonly cacheRequests: Counter<"model" | "result">;
  private readonly cacheCounts = new Map<string, { series: Record<string, Counter.Internal>; hits: number; misses: number }>();
  readonly storeErrors: Counter<"store">;
  /** Issue 32: the share of each account's budget used in its current period (1 = spent), set at each reservation. */
  readonly budgetUsed: Gauge<"account">;
  readonly upstreamLatency: Histogram<"model" | "upstream">;
  readonly upstreamFailures: Counter<"model" | "upstream">;
  /** Batch API lines run, by endpoint and outcome (completed, failed): rate() gives lines per second. */
  readonly batchLines: Counter<"endpoint" | "outcome">;
  /** Issue 45: requests a route's target answered (the split), and fallbacks away from a target by reason. */
  readonly routeRequests: Counter<"route" | "target">;
  readonly routeFallbacks: Counter<"route" | "target" | "reason">;
  /** Route series by label values, looked up once each (as the request series are, plugins/observability.ts). */
  private readonly routeSeries = new Map<string, Counter.Internal>();
  /** The scheduler's per-request series, looked up once per label set (a label object is hashed on every call). */
  private readonly queueWaitSeries = new Map<string, Histogram.Internal<"model" | "priority">>();
  /** The counters every request adds to, counted in fields and added to the counters at each read (counted-series.ts). */
  private readonly requestCounts: CountedSeriesSet<"endpoint" | "model" | "status" | "code">;
  private readonly rateLimitCounts: CountedSeriesSet<"plan" | "outcome">;
  private readonly anonymousLimitCounts: CountedSeriesSet<"outcome">;
  private readonly promptTokenCounts: CountedSeriesSet<"model" | "account">;
  private readonly completionTokenCounts: CountedSeriesSet<"model" | "account">;
  private readonly serviceCounts: CountedSeriesSet<"model" | "priority" | "account">;
  /** Where the batch queue depth is read at scrape time (the runner sets it: the store counts pending lines). */
  batchQueueDepth: (() => Promise<number>) | null = null;

  constructor(source: () => MetricsSource | null, readonly perAccount = false) {
    const runners = () => source()?.stats() ?? [];
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: "modelgate_" });
    registerAfterGcGauges(this.registry);
    registerWorkerHeapGauges(this.registry);
    this.requestCounts = new CountedSeriesSet({ name: "modelgate_requests_total", help: "Requests answered, by endpoint, model, status and §7 error code", labelNames: ["endpoint", "model", "status", "code"], registers });
    this.requests = this.requestCounts.counter;
    this.requestDuration = new Histogram({ name: "modelgate_request_duration_seconds", help: "Time from request to the last byte of the answer", labelNames: ["endpoint", "model"], buckets: durationBuckets, registers });
    this.ttft = new Histogram({ name: "modelgate_time_to_first_token_seconds", help: "Time from request to the first generated token", labelNames: ["model"], buckets: ttftBuckets, registers });
    this.interToken = new Histogram({ name: "modelgate_inter_token_latency_seconds", help: "Time between two streamed tokens", labelNames: ["model"], buckets: itlBuckets, registers });
    const tokenLabels = perAccount ? (["model", "account"] as const) : (["model"] as const);
    this.promptTokenCounts = new CountedSeriesSet({ name: "modelgate_prompt_tokens_total", help: "Prompt tokens processed", labelNames: [...tokenLabels], registers });
    this.promptTokens = this.promptTokenCounts.counter;
    this.completionTokenCounts = new CountedSeriesSet({ name: "modelgate_completion_tokens_total", help: "Completion tokens generated", labelNames: [...tokenLabels], registers });
    this.completionTokens = this.completionTokenCounts.counter;
    this.generationRate = new Histogram({ name: "modelgate_generation_tokens_per_second", help: "Completion tokens per second of one generation, after its first token", labelNames: ["model"], buckets: rateBuckets, registers });
    this.queueWait = new Histogram({ name: "modelgate_queue_wait_seconds", help: "Time a request waited for a slot, by priority", labelNames: ["model", "priority"], buckets: durationBuckets, registers });
    this.overloaded = new Counter({ name: "modelgate_overloaded_total", help: "503 overloaded, by reason (queue_full, deadline, no_capacity)", labelNames: ["model", "reason"], registers });
    this.serviceCounts = new CountedSeriesSet({
      name: "modelgate_service_tokens_total",
      help: "Tokens of service the fair-share scheduler charged (prompt at admission, completion as generated), by priority class (and account with metrics.perAccount)",
      labelNames: perAccount ? ["model", "priority", "account"] : ["model", "priority"],
      registers,
    });
    this.service = this.serviceCounts.counter;
    this.loads = new Counter({ name: "modelgate_model_loads_total", help: "Model loads, by outcome", labelNames: ["model", "outcome"], registers });
    this.unloads = new Counter({ name: "modelgate_model_unloads_total", help: "Model unloads", labelNames: ["model"], registers });
    this.loadDuration = new Histogram({ name: "modelgate_model_load_duration_seconds", help: "Time to load a model", labelNames: ["model"], buckets: [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300], registers });
    this.rateLimitCounts = new CountedSeriesSet({ name: "modelgate_rate_limit_decisions_total", help: "Rate-limit decisions for keys, by plan and outcome (allowed, limited)", labelNames: ["plan", "outcome"], registers });
    this.rateLimit = this.rateLimitCounts.counter;
    this.anonymousLimitCounts = new CountedSeriesSet({ name: "modelgate_anonymous_limit_decisions_total", help: "Anonymous-limiter decisions (requests without a valid key), by outcome", labelNames: ["outcome"], registers });
    this.anonymousLimit = this.anonymousLimitCounts.counter;
    this.tooLarge = new Counter({ name: "modelgate_request_too_large_total", help: "Requests refused with 413", labelNames: ["endpoint"], registers });
    this.cacheRequests = new Counter({ name: "modelgate_cache_requests_total", help: "Requests the response cache applied to, by model and result (hit, miss, bypass)", labelNames: ["model", "result"], registers });
    const cacheCounts = this.cacheCounts;
    new Gauge({
      name: "modelgate_cache_hit_ratio",
      help: "Response cache hits / (hits + misses) per model since start (bypasses not counted)",
      labelNames: ["model"],
      registers,
      collect() {
        this.reset();
        for (const [model, c] of cacheCounts) if (c.hits + c.misses > 0) this.set({ model }, c.hits / (c.hits + c.misses));
      },
    });
    this.budgetUsed = new Gauge({ name: "modelgate_budget_used_ratio", help: "Share of the account's budget used in its current period (accounts with a budget)", labelNames: ["account"], registers });
    this.storeErrors = new Counter({ name: "modelgate_store_errors_total", help: "Failed calls to the shared stores (database, redis)", labelNames: ["store"], registers });
    this.routeRequests = new Counter({ name: "modelgate_route_requests_total", help: "Requests a route's target answered, by route and target (the split)", labelNames: ["route", "target"], registers });
    this.routeFallbacks = new Counter({
      name: "modelgate_route_fallbacks_total",
      help: "Requests a route moved on from a target, by route, target and reason (unavailable, overloaded, upstream_error, context_window)",
      labelNames: ["route", "target", "reason"],
      registers,
    });
    this.batchLines = new Counter({ name: "modelgate_batch_lines_total", help: "Batch API lines run, by endpoint and outcome (completed, failed)", labelNames: ["endpoint", "outcome"], registers });
    const batchDepth = () => this.batchQueueDepth;
    new Gauge({
      name: "modelgate_batch_queue_depth",
      help: "Batch API lines waiting to run, in batches in progress (all replicas: read from the store)",
      registers,
      async collect() {
        const read = batchDepth();
        if (!read) return;
        try {
          this.set(await read());
        } catch {
          // The store is unreachable: the last value stays, and modelgate_store_errors_total says why.
        }
      },
    });
    this.upstreamLatency = new Histogram({
      name: "modelgate_upstream_latency_seconds",
      help: "Time to an upstream's answer (headers and first event)",
      labelNames: ["model", "upstream"],
      buckets: durationBuckets,
      registers,
      collect() {
        for (const { model, upstream, seconds } of source()?.takeUpstreamLatencies() ?? []) for (const s of seconds) this.observe({ model, upstream }, s);
      },
    });
    this.upstreamFailures = new Counter({
      name: "modelgate_upstream_failures_total",
      help: "Failed upstream calls and health checks",
      labelNames: ["model", "upstream"],
      registers,
      // The pool counts; this mirrors its totals at scrape time (they only grow).
      collect() {
        this.reset();
        for (const s of runners()) for (const u of s.upstreams ?? []) this.inc({ model: s.id, upstream: u.url }, u.failuresTotal);
      },
    });
    new Counter({
      name: "modelgate_upstream_affinity_placements_total",
      help: "prefix-affinity pools: attempts placed on an upstream that holds their conversation's cache (its ring owner, or where it settled after a spill), spilled past a busier one, or retried",
      labelNames: ["model", "upstream", "placement"],
      registers,
      collect() {
        this.reset();
        for (const s of runners()) {
          for (const u of s.upstreams ?? []) for (const placement of affinityPlacements) if (u.affinity) this.inc({ model: s.id, upstream: u.url, placement }, u.affinity[placement]);
        }
      },
    });

    for (const [name, help, field] of [
      ["modelgate_prompt_tokens_evaluated_total", "Prompt tokens of chats on engines with a KV cache per sequence", "promptTokens"],
      ["modelgate_prompt_tokens_cached_total", "Of those, tokens reused from the sequence's KV cache (cache hit ratio = cached / evaluated)", "reusedTokens"],
    ] as const) {
      new Counter({
        name,
        help,
        labelNames: ["model"],
        registers,
        collect() {
          this.reset();
          for (const s of runners()) if (s.promptCache) this.inc({ model: s.id }, s.promptCache[field]);
        },
      });
    }

    const gauge = (name: string, help: string, labelNames: string[], fill: (g: Gauge<string>, stats: RunnerStats[]) => void) =>
      new Gauge({
        name,
        help,
        labelNames,
        registers,
        collect() {
          this.reset();
          fill(this, runners());
        },
      });
    gauge("modelgate_queue_depth", "Requests waiting for a slot", ["model"], (g, all) => all.forEach((s) => g.set({ model: s.id }, s.queueDepth)));
    gauge("modelgate_slots_active", "Slots in use", ["model"], (g, all) => all.forEach((s) => g.set({ model: s.id }, s.active)));
    gauge("modelgate_slots_total", "Slots of the model (its parallel)", ["model"], (g, all) => all.forEach((s) => g.set({ model: s.id }, s.parallel)));
    gauge("modelgate_model_state", "1 for the model's load state, 0 for the others", ["model", "state"], (g, all) =>
      all.forEach((s) => loadStates.forEach((state) => g.set({ model: s.id, state }, s.state === state ? 1 : 0))),
    );
    gauge("modelgate_upstream_in_flight", "Requests in flight to an upstream", ["model", "upstream"], (g, all) =>
      all.forEach((s) => s.upstreams?.forEach((u) => g.set({ model: s.id, upstream: u.url }, u.inFlight))),
    );
    gauge("modelgate_upstream_affinity_hit_ratio", "prefix-affinity pools: first attempts placed where their conversation's cache is (ring owner or settled upstream) / all first attempts, since load", ["model"], (g, all) =>
      all.forEach((s) => {
        const placed = s.upstreams?.flatMap((u) => (u.affinity ? [u.affinity] : [])) ?? [];
        const owner = placed.reduce((n, p) => n + p.owner, 0);
        const first = owner + placed.reduce((n, p) => n + p.spill, 0);
        if (first > 0) g.set({ model: s.id }, owner / first);
      }),
    );
    gauge("modelgate_upstream_state", "1 for the upstream's state, 0 for the others", ["model", "upstream", "state"], (g, all) =>
      all.forEach((s) => s.upstreams?.forEach((u) => upstreamStates.forEach((state) => g.set({ model: s.id, upstream: u.url, state }, u.state === state ? 1 : 0)))),
    );
  }

  /** The scheduler's events, as the catalog's runners report them. */
  readonly runnerObserver = {
    queueWait: (model: string, seconds: number, priority: Priority) =>
      cachedSeries(this.queueWaitSeries, `${model}\u0000${priority}`, () => this.queueWait.labels({ model, priority })).observe(seconds),
    refused: (model: string, reason: RefusalReason) => this.overloaded.inc({ model, reason }),
    served: (model: string, account: string, priority: Priority, tokens: number) => {
      // Per account the label set is unbounded, as is the metric.
      if (this.perAccount) this.serviceCounts.get(`${model}\u0000${priority}\u0000${account}`, () => ({ model, priority, account })).inc(tokens);
      else this.serviceCounts.get(`${model}\u0000${priority}`, () => ({ model, priority }) as Record<"model" | "priority" | "account", string>).inc(tokens);
    },
    loaded: (model: string, seconds: number, ok: boolean) => {
      this.loads.inc({ model, outcome: ok ? "ok" : "failed" });
      if (ok) this.loadDuration.observe({ model }, seconds);
    },
    unloaded: (model: string) => this.unloads.inc({ model }),
  };

  /** A request a route's target answered. */
  routeServed(route: string, target: string): void {
    cachedSeries(this.routeSeries, `${route}\u0000${target}`, () => this.routeRequests.labels({ route, target })).inc();
  }

  /** A request a route moved on from `target`, and why. */
  routeFallback(route: string, target: string, reason: string): void {
    cachedSeries(this.routeSeries, `${route}\u0000${target}\u0000${reason}`, () => this.routeFallbacks.labels({ route, target, reason })).inc();
  }

  /** Token counters, with the account label only when configured. */
  tokens(model: string, account: string, prompt: number, completion: number): void {
    const key = this.perAccount ? `${model}\u0000${account}` : model;
    const labels = () => (this.perAccount ? { model, account } : { model }) as Record<"model" | "account", string>;
    if (prompt > 0) this.promptTokenCounts.get(key, labels).inc(prompt);
    if (completion > 0) this.completionTokenCounts.get(key, labels).inc(completion);
  }

  /** A request answered (plugins/observability.ts). */
  requestCount(key: string, labels: () => Record<"endpoint" | "model" | "status" | "code", string>): CountedSeries {
    return this.requestCounts.get(key, labels);
  }

  /** A key's rate-limit decision (`plan` null: the per-address limiter's, for a request without a valid key). */
  limiterDecision(plan: string | null, outcome: "limited" | "allowed"): CountedSeries {
    if (plan === null) return this.anonymousLimitCounts.get(outcome, () => ({ outcome }));
    return this.rateLimitCounts.get(`${plan}\u0000${outcome}`, () => ({ plan, outcome }));
  }

  /** One request the response cache applied to (the series are looked up once per model). */
  cacheLookup(model: string, result: "hit" | "miss" | "bypass"): void {
    let counts = this.cacheCounts.get(model);
    if (!counts) {
      const series = Object.fromEntries((["hit", "miss", "bypass"] as const).map((r) => [r, this.cacheRequests.labels({ model, result: r })]));
      this.cacheCounts.set(model, (counts = { series, hits: 0, misses: 0 }));
    }
    counts.series[result].inc();
    if (result === "hit") counts.hits++;
    else if (result === "miss") counts.misses++;
  }
}
