import type { FastifyBaseLogger } from "fastify";
import type { ModelEntry, RouteEntry } from "../config/app-config.ts";
import type { Engine, EngineSupport } from "../engines/engine.ts";
import type { EngineLog } from "../engines/engine-kind.ts";
import { AppError } from "../errors/app-error.ts";
import { ModelRunner } from "../scheduler/model-runner.ts";
import type { RunnerObserver, RunnerStats } from "../scheduler/runner-types.ts";
import { ModelRoute } from "./model-route.ts";
import { checkRouteDimensions } from "./route-dimensions.ts";

/** What the catalog needs of the engine registry: what an entry's engine can do, and how to build it. */
export interface EngineBuilder {
  support(entry: ModelEntry): EngineSupport;
  create(entry: ModelEntry, log: EngineLog): Promise<Engine>;
}

/** The models this node serves, each with its runner, and the routes over them (issue 45). */
export class ModelCatalog {
  private runners = new Map<string, ModelRunner>();
  private listed: readonly ModelRunner[] | null = null;
  private routes = new Map<string, ModelRoute>();
  readonly created = Math.floor(Date.now() / 1000);
  /** Reloads apply one after the other. */
  private reloading: Promise<ReloadSummary> | null = null;

  constructor(
    entries: ModelEntry[],
    private readonly engines: EngineBuilder,
    private readonly log: FastifyBaseLogger,
    private readonly observer?: RunnerObserver,
    routes: readonly RouteEntry[] = [],
  ) {
    for (const entry of entries) this.runners.set(entry.id, this.runnerFor(entry));
    this.routes = this.routesFor(routes);
  }

  private routesFor(routes: readonly RouteEntry[]): Map<string, ModelRoute> {
    const runner = (id: string) => this.runners.get(id)!;
    return new Map(routes.map((r) => [r.id, new ModelRoute(r, [...r.targets.map((t) => t.model), ...r.fallbacks].map((id) => runner(id)))]));
  }

  private runnerFor(entry: ModelEntry, create: (entry: ModelEntry) => Promise<Engine> = (e) => this.engines.create(e, this.log.child({ model: e.id }))): ModelRunner {
    return new ModelRunner(entry, this.engines.support(entry), create, this.log, this.observer);
  }

  /** The runners, as one array per catalog state: a reload gives a new array, so callers may cache on its identity. */
  list(): readonly ModelRunner[] {
    return (this.listed ??= [...this.runners.values()]);
  }

  find(id: string): ModelRunner | undefined {
    return this.runners.get(id);
  }

  /** The route named `id`, if there is one (its targets are found with `find`, so a reload never leaves one stale). */
  route(id: string): ModelRoute | undefined {
    return this.routes.get(id);
  }

  /** What a client's model id names, as the capability check sees it: a route's shared view, or the model's own. */
  named(id: string): { entry: ModelEntry; support: EngineSupport } | undefined {
    return this.routes.get(id)?.asModel ?? this.runners.get(id);
  }

  routeList(): ModelRoute[] {
    return [...this.routes.values()];
  }

  /** The runner for `id`, or 404 model_not_found with param "model". */
  get(id: string): ModelRunner {
    const runner = this.runners.get(id);
    if (!runner) throw new AppError("model_not_found", { param: "model", message: `The model '${id}' does not exist.` });
    return runner;
  }

  /**
   * Loads every eager model; resolves when each is ready, failed or missing (`serve` reports which, once). Then each
   * embeddings route's loaded targets must give vectors of one length: a ConfigError naming the route otherwise.
   */
  async loadEager(): Promise<void> {
    await Promise.all(this.list().filter((r) => r.entry.load === "eager").map((r) => r.load()));
    await checkRouteDimensions(this.routeList(), (id) => this.find(id), this.log);
  }

  /** Ready means every eager model is loaded (a missing one keeps the node not ready: /readyz says which). */
  ready(): boolean {
    return this.list().every((r) => r.entry.load !== "eager" || r.state === "ready");
  }

  /** Upstream latencies per model and upstream since the last call (the metrics scrape takes them). */
  takeUpstreamLatencies(): { model: string; upstream: string; seconds: number[] }[] {
    return this.list().flatMap((r) => [...r.takeUpstreamLatencies()].map(([upstream, seconds]) => ({ model: r.entry.id, upstream, seconds })));
  }

  stats(): RunnerStats[] {
    return this.list().map((r) => r.stats());
  }

  async unloadAll(): Promise<void> {
    await Promise.all(this.list().map((r) => r.unload()));
  }

  /**
   * Applies a new list of entries (SIGHUP config reload) without dropping connections:
   * - added models get a runner (eager ones start loading);
   * - removed models leave the catalog at once (new requests get 404) and are unloaded once their in-flight
   *   requests finish;
   * - changed models (any field differs) get a new runner right away; its load waits until the old runner has
   *   drained, so requests meanwhile get 503 model_loading and both never hold memory at once.
   * Resolves when removed and replaced runners are unloaded and eager models are loaded.
   */
  reload(entries: ModelEntry[], routes?: readonly RouteEntry[]): Promise<ReloadSummary> {
    const previous = this.reloading ?? Promise.resolve(null);
    const run = previous.then(() => this.applyReload(entries, routes));
    this.reloading = run;
    void run.finally(() => {
      if (this.reloading === run) this.reloading = null;
    });
    return run;
  }

  private async applyReload(entries: ModelEntry[], routes?: readonly RouteEntry[]): Promise<ReloadSummary> {
    const old = this.runners;
    const next = new Map<string, ModelRunner>();
    const summary: ReloadSummary = { added: [], removed: [], changed: [], unchanged: [] };
    const draining: Promise<void>[] = [];
    const loading: Promise<void>[] = [];
    for (const entry of entries) {
      const current = old.get(entry.id);
      if (current && sameEntry(current.entry, entry)) {
        next.set(entry.id, current);
        summary.unchanged.push(entry.id);
        continue;
      }
      let runner: ModelRunner;
      if (current) {
        const drained = current.unload();
        draining.push(drained);
        runner = this.runnerFor(entry, async (e) => {
          await drained;
          return this.engines.create(e, this.log.child({ model: e.id }));
        });
        summary.changed.push(entry.id);
        // A replaced model that was serving comes back without waiting for a request.
        if (entry.load === "eager" || current.state === "ready" || current.state === "loading") loading.push(runner.load());
      } else {
        runner = this.runnerFor(entry);
        summary.added.push(entry.id);
        if (entry.load === "eager") loading.push(runner.load());
      }
      next.set(entry.id, runner);
    }
    for (const [id, runner] of old) {
      if (next.has(id)) continue;
      summary.removed.push(id);
      draining.push(runner.unload());
    }
    this.runners = next;
    this.listed = null;
    // The config loader checked the routes against these entries; without new routes, the old ones must still fit.
    this.routes = this.routesFor(routes ?? [...this.routes.values()].map((r) => r.config).filter((r) => [...r.targets.map((t) => t.model), ...r.fallbacks].every((id) => next.has(id))));
    this.log.info(summary, "model catalog reloaded");
    await Promise.all([...draining, ...loading]);
    // A reload cannot refuse to start: a length mismatch is logged at error level (as a startup would have refused).
    await checkRouteDimensions(this.routeList(), (id) => this.find(id), this.log).catch((err: unknown) => this.log.error({ err }, "model catalog reload: an embeddings route mixes vector lengths"));
    return summary;
  }
}

export interface ReloadSummary {
  added: string[];
  removed: string[];
  changed: string[];
  unchanged: string[];
}

function sameEntry(a: ModelEntry, b: ModelEntry): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
