import { existsSync } from "node:fs";
import type { FastifyBaseLogger } from "fastify";
import type { ModelEntry } from "../config/app-config.ts";
import type { Engine } from "../engines/engine.ts";
import { AppError } from "../errors/app-error.ts";
import { FairQueue } from "./fair-queue.ts";

export type LoadState = "missing" | "unloaded" | "loading" | "ready" | "failed";

export interface RunnerStats {
  id: string;
  state: LoadState;
  queueDepth: number;
  active: number;
  parallel: number;
  error: string | null;
}

/** A slot of the model's `parallel` capacity; release it exactly once when the work ends. */
export interface Lease {
  engine: Engine;
  release(): void;
}

interface Waiter {
  resolve(lease: Lease): void;
  reject(err: unknown): void;
}

/**
 * Per-model scheduling: load state, `parallel` concurrent slots, a bounded fair wait queue,
 * and idle unloading after `keepAlive`.
 */
export class ModelRunner {
  state: LoadState;
  lastError: string | null = null;
  private engine: Engine | null = null;
  private loading: Promise<void> | null = null;
  private active = 0;
  private readonly queue: FairQueue<Waiter>;
  private idleTimer: NodeJS.Timeout | null = null;
  private drainWaiters: (() => void)[] = [];
  /** Moving average of how long one lease is held, for honest Retry-After estimates. */
  private avgLeaseMs = 2000;
  private lastLoadMs = 5000;

  constructor(
    readonly entry: ModelEntry,
    private readonly createEngine: (entry: ModelEntry) => Promise<Engine>,
    private readonly log: FastifyBaseLogger,
  ) {
    this.queue = new FairQueue(entry.queueSize);
    this.state = this.filesPresent() ? "unloaded" : "missing";
  }

  filesPresent(): boolean {
    return this.entry.path === null || existsSync(this.entry.path);
  }

  stats(): RunnerStats {
    return {
      id: this.entry.id,
      state: this.state,
      queueDepth: this.queue.size,
      active: this.active,
      parallel: this.entry.parallel,
      error: this.lastError,
    };
  }

  /** Loads the engine; resolves when ready or failed (never rejects). */
  load(): Promise<void> {
    if (this.state === "ready") return Promise.resolve();
    if (this.loading) return this.loading;
    if (!this.filesPresent()) {
      this.state = "missing";
      return Promise.resolve();
    }
    this.state = "loading";
    const started = Date.now();
    this.loading = (async () => {
      try {
        const engine = await this.createEngine(this.entry);
        await engine.load();
        this.engine = engine;
        this.state = "ready";
        this.lastError = null;
        this.lastLoadMs = Date.now() - started;
        this.log.info({ model: this.entry.id, ms: this.lastLoadMs }, "model loaded");
        this.armIdleTimer();
      } catch (err) {
        this.state = "failed";
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
    if (this.state === "ready") this.state = this.filesPresent() ? "unloaded" : "missing";
    if (engine) await engine.unload();
  }

  /** Throws the 404/503/500 a request for this model gets when it cannot run now. */
  assertServable(): Engine {
    if (this.state === "ready" && this.engine) return this.engine;
    if (this.state === "missing" || (this.state === "unloaded" && !this.filesPresent())) {
      this.state = "missing";
      throw new AppError("model_not_found", {
        param: "model",
        message: `The model '${this.entry.id}' is configured but its files are missing (${this.entry.path}). Run \`modelgate pull ${this.entry.hubRef ?? this.entry.source}\`.`,
      });
    }
    if (this.state === "failed") {
      throw new AppError("internal_error", { message: `The model '${this.entry.id}' failed to load.` });
    }
    if (this.state === "unloaded") void this.load();
    throw new AppError("model_loading", {
      message: `The model '${this.entry.id}' is loading.`,
      retryAfterMs: Math.max(1000, this.lastLoadMs),
    });
  }

  /**
   * Waits for a free slot. Throws 503 overloaded when the queue is full, and the signal's reason when it aborts.
   * `queueKey` is the fairness key (the API key id).
   */
  acquire(queueKey: string, signal: AbortSignal): Promise<Lease> {
    const engine = this.assertServable();
    signal.throwIfAborted();
    if (this.active < this.entry.parallel && this.queue.size === 0) return Promise.resolve(this.grant(engine));
    if (this.queue.full) {
      const waits = Math.ceil((this.queue.size + 1) / this.entry.parallel);
      throw new AppError("overloaded", {
        message: `The model '${this.entry.id}' is at capacity.`,
        retryAfterMs: Math.max(1000, waits * this.avgLeaseMs),
      });
    }
    return new Promise<Lease>((resolve, reject) => {
      const waiter: Waiter = {
        resolve: (lease) => {
          signal.removeEventListener("abort", onAbort);
          resolve(lease);
        },
        reject,
      };
      const onAbort = () => {
        if (this.queue.remove(queueKey, waiter)) reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.queue.push(queueKey, waiter);
    });
  }

  /** Runs `work` on a slot (waiting for one as `acquire` does) and frees the slot when it settles. */
  async run<T>(queueKey: string, signal: AbortSignal, work: (engine: Engine) => Promise<T>): Promise<T> {
    const lease = await this.acquire(queueKey, signal);
    try {
      return await work(lease.engine);
    } finally {
      lease.release();
    }
  }

  private grant(engine: Engine): Lease {
    this.active++;
    this.clearIdleTimer();
    const started = Date.now();
    let released = false;
    return {
      engine,
      release: () => {
        if (released) return;
        released = true;
        this.active--;
        this.avgLeaseMs = this.avgLeaseMs * 0.8 + (Date.now() - started) * 0.2;
        this.next();
      },
    };
  }

  private next(): void {
    while (this.active < this.entry.parallel && this.queue.size > 0) {
      const waiter = this.queue.shift()!;
      if (this.state === "ready" && this.engine) waiter.resolve(this.grant(this.engine));
      else waiter.reject(new AppError("model_loading", { retryAfterMs: this.lastLoadMs }));
    }
    if (this.active === 0) {
      for (const resolve of this.drainWaiters.splice(0)) resolve();
      this.armIdleTimer();
    }
  }

  private armIdleTimer(): void {
    this.clearIdleTimer();
    if (this.entry.keepAliveMs === null || this.state !== "ready" || this.active > 0) return;
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
