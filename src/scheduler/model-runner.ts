import type { FastifyBaseLogger } from "fastify";
import { locateModelFiles, missingFilesMessage } from "../config/model-files.ts";
import type { ModelEntry } from "../config/app-config.ts";
import type { Engine, EngineSupport, PromptCacheStats, UpstreamStats } from "../engines/engine.ts";
import { DeadlineExceeded } from "../errors/aborts.ts";
import { AppError } from "../errors/app-error.ts";
import { FairQueue } from "./fair-queue.ts";

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
}

/** Scheduler events for metrics (src/metrics): queue waits, loads and unloads. */
export interface RunnerObserver {
  queueWait(model: string, seconds: number): void;
  loaded(model: string, seconds: number, ok: boolean): void;
  unloaded(model: string): void;
}

/** Slots of the model's `parallel` capacity held by one request; release exactly once when the work ends. */
export interface Lease {
  engine: Engine;
  slots: number;
  release(): void;
}

/**
 * One inference request as the scheduler runs it: prepare → admit → run → release. The runner owns every step
 * but the work itself, so no service or engine holds capacity of its own.
 */
export interface Job<P, R> {
  /** Fairness key of the queue (the API key id). */
  queueKey: string;
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

interface Waiter {
  wanted: number;
  resolve(lease: Lease): void;
  reject(err: unknown): void;
}

/**
 * Per-model scheduling: load state, `parallel` slots, a bounded fair wait queue, a bounded prepare stage for
 * engines whose prepare is costly, and idle unloading after `keepAlive`. State changes only through its methods.
 */
export class ModelRunner {
  #state: LoadState;
  private lastError: string | null = null;
  private engine: Engine | null = null;
  private loading: Promise<void> | null = null;
  private active = 0;
  private preparing = 0;
  private readonly queue: FairQueue<Waiter>;
  private idleTimer: NodeJS.Timeout | null = null;
  private drainWaiters: (() => void)[] = [];
  /** Moving average of how long one lease is held, for honest Retry-After estimates. */
  private avgLeaseMs = 2000;
  private lastLoadMs = 5000;

  constructor(
    readonly entry: ModelEntry,
    readonly support: EngineSupport,
    private readonly createEngine: (entry: ModelEntry) => Promise<Engine>,
    private readonly log: FastifyBaseLogger,
    private readonly observer?: RunnerObserver,
  ) {
    this.queue = new FairQueue(entry.queueSize);
    this.#state = locateModelFiles(entry) ? "unloaded" : "missing";
  }

  get state(): LoadState {
    return this.#state;
  }

  /** Whether the model's files are on disk (re-resolving a pulled hub quant's file name). */
  filesPresent(): boolean {
    return locateModelFiles(this.entry);
  }

  /**
   * Looks at the files again (they may have been pulled or removed since): an idle model with files is
   * `unloaded` (the next request loads it), one without is `missing`. A loaded or loading model is left alone.
   */
  refresh(): LoadState {
    if (this.#state === "missing" || this.#state === "unloaded") this.#state = this.filesPresent() ? "unloaded" : "missing";
    return this.#state;
  }

  stats(): RunnerStats {
    return {
      id: this.entry.id,
      state: this.#state,
      queueDepth: this.queue.size,
      active: this.active,
      parallel: this.entry.parallel,
      preparing: this.preparing,
      error: this.lastError,
      ...(this.engine?.upstreamStats ? { upstreams: this.engine.upstreamStats() } : {}),
      ...(this.engine?.promptCacheStats ? { promptCache: this.engine.promptCacheStats() } : {}),
    };
  }

  /** Upstream latencies since the last call (engines that forward), for the metrics. */
  takeUpstreamLatencies(): Map<string, number[]> {
    return this.engine?.takeUpstreamLatencies?.() ?? new Map();
  }

  /** Loads the engine; resolves when ready or failed (never rejects). */
  load(): Promise<void> {
    if (this.#state === "ready") return Promise.resolve();
    if (this.loading) return this.loading;
    if (!this.filesPresent()) {
      this.#state = "missing";
      return Promise.resolve();
    }
    this.#state = "loading";
    const started = Date.now();
    this.loading = (async () => {
      try {
        const engine = await this.createEngine(this.entry);
        await engine.load();
        this.engine = engine;
        this.#state = "ready";
        this.lastError = null;
        this.lastLoadMs = Date.now() - started;
        this.observer?.loaded(this.entry.id, this.lastLoadMs / 1000, true);
        this.log.info({ model: this.entry.id, ms: this.lastLoadMs }, "model loaded");
        this.armIdleTimer();
      } catch (err) {
        this.#state = "failed";
        this.observer?.loaded(this.entry.id, (Date.now() - started) / 1000, false);
        this.lastError = (err as Error).message;
        this.log.error({ model: this.entry.id, err }, "model failed to load");
      } finally {
        this.loading = null;
      }
    })();
    return this.loading;
  }

  /** Waits for in-flight work to finish, then frees the engine. */
  async unload(): Promise<void> {
    if (this.loading) await this.loading;
    while (this.active > 0) await new Promise<void>((resolve) => this.drainWaiters.push(resolve));
    this.clearIdleTimer();
    const engine = this.engine;
    this.engine = null;
    if (this.#state === "ready") this.#state = this.filesPresent() ? "unloaded" : "missing";
    if (engine) {
      await engine.unload();
      this.observer?.unloaded(this.entry.id);
    }
  }

  /**
   * Runs one request through prepare → admit → run → release. Throws 404 (files missing), 500 (load failed),
   * 503 model_loading, the prepare step's 400s, 503 overloaded (queue or prepare stage full, or no slot before
   * the deadline), and whatever the work throws; the slots are released in every case.
   */
  async execute<P, R>(job: Job<P, R>): Promise<R> {
    const engine = this.servable();
    const prepared = await this.prepareStage(() => job.prepare(engine, job.signal));
    job.signal.throwIfAborted();
    let lease: Lease;
    const waitStarted = performance.now();
    try {
      lease = await this.admit(job.queueKey, job.signal, job.slots?.(prepared) ?? 1, job.onQueued);
      this.observer?.queueWait(this.entry.id, (performance.now() - waitStarted) / 1000);
    } catch (err) {
      if (err instanceof DeadlineExceeded) throw this.noCapacityInTime();
      throw err;
    }
    try {
      // The model was reloaded while this request prepared: its prepared state belongs to the old engine.
      if (lease.engine !== engine) throw this.loadingError();
      return await job.run(lease.engine, prepared, lease);
    } finally {
      lease.release();
    }
  }

  /**
   * Only the prepare step (counting a prompt for /v1/tokenize): the engine's 400s, without taking a slot.
   * Returns what it prepared and the engine's served context window.
   */
  async prepareOnly<P>(signal: AbortSignal, prepare: (engine: Engine, signal: AbortSignal) => P | Promise<P>): Promise<{ prepared: P; contextSize: number | null }> {
    const engine = this.servable();
    const prepared = await this.prepareStage(() => prepare(engine, signal));
    return { prepared, contextSize: engine.contextSize };
  }

  /**
   * The admit step: takes up to `wanted` free slots (at least one), or waits in the fair queue for one. Throws
   * 503 overloaded when the queue is full, and the signal's reason when it aborts while waiting.
   */
  private admit(queueKey: string, signal: AbortSignal, wanted = 1, onQueued?: () => void): Promise<Lease> {
    const engine = this.servable();
    signal.throwIfAborted();
    const want = Math.max(1, Math.min(wanted, this.entry.parallel));
    if (this.active < this.entry.parallel && this.queue.size === 0) return Promise.resolve(this.grant(engine, want));
    if (this.queue.full) {
      const waits = Math.ceil((this.queue.size + 1) / this.entry.parallel);
      throw new AppError("overloaded", {
        message: `The model '${this.entry.id}' is at capacity.`,
        retryAfterMs: Math.max(1000, waits * this.avgLeaseMs),
      });
    }
    onQueued?.();
    return new Promise<Lease>((resolve, reject) => {
      const waiter: Waiter = {
        wanted: want,
        resolve: (lease) => {
          signal.removeEventListener("abort", onAbort);
          resolve(lease);
        },
        reject: (err) => {
          signal.removeEventListener("abort", onAbort);
          reject(err);
        },
      };
      const onAbort = () => {
        if (this.queue.remove(queueKey, waiter)) reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.queue.push(queueKey, waiter);
    });
  }

  /** The engine when the model can serve now, else the 404 / 500 / 503 a request for it gets. */
  private servable(): Engine {
    if (this.#state === "ready" && this.engine) return this.engine;
    if (this.refresh() === "missing") throw new AppError("model_not_found", { param: "model", message: missingFilesMessage(this.entry) });
    if (this.#state === "failed") throw new AppError("internal_error", { message: `The model '${this.entry.id}' failed to load.` });
    if (this.#state === "unloaded") void this.load();
    throw this.loadingError();
  }

  /** Costly prepares (image processing) run at most `parallel + queueSize` at once; past that, 503 overloaded. */
  private async prepareStage<P>(prepare: () => P | Promise<P>): Promise<P> {
    if (!this.support.expensivePrepare) return prepare();
    if (this.preparing >= this.entry.parallel + this.entry.queueSize) {
      throw new AppError("overloaded", { message: `The model '${this.entry.id}' is at capacity.`, retryAfterMs: Math.max(1000, this.avgLeaseMs) });
    }
    this.preparing++;
    try {
      return await prepare();
    } finally {
      this.preparing--;
    }
  }

  private loadingError(): AppError {
    return new AppError("model_loading", { message: `The model '${this.entry.id}' is loading.`, retryAfterMs: Math.max(1000, this.lastLoadMs) });
  }

  private noCapacityInTime(): AppError {
    return new AppError("overloaded", { message: `The model '${this.entry.id}' had no free capacity within the request deadline.`, retryAfterMs: 1000 });
  }

  private grant(engine: Engine, wanted: number): Lease {
    const slots = Math.max(1, Math.min(wanted, this.entry.parallel - this.active));
    this.active += slots;
    this.clearIdleTimer();
    const started = Date.now();
    let released = false;
    return {
      engine,
      slots,
      release: () => {
        if (released) return;
        released = true;
        this.active -= slots;
        this.avgLeaseMs = this.avgLeaseMs * 0.8 + (Date.now() - started) * 0.2;
        this.next();
      },
    };
  }

  private next(): void {
    while (this.active < this.entry.parallel && this.queue.size > 0) {
      const waiter = this.queue.shift()!;
      if (this.#state === "ready" && this.engine) waiter.resolve(this.grant(this.engine, waiter.wanted));
      else waiter.reject(this.loadingError());
    }
    if (this.active === 0) {
      for (const resolve of this.drainWaiters.splice(0)) resolve();
      this.armIdleTimer();
    }
  }

  private armIdleTimer(): void {
    this.clearIdleTimer();
    if (this.entry.keepAliveMs === null || this.#state !== "ready" || this.active > 0) return;
    this.idleTimer = setTimeout(() => {
      this.log.info({ model: this.entry.id }, "unloading idle model");
      void this.unload();
    }, this.entry.keepAliveMs);
    this.idleTimer.unref();
  }

  private clearIdleTimer(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
  }
}
