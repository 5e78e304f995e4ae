import type { FastifyBaseLogger } from "fastify";
import { locateModelFiles, missingFilesMessage } from "../config/model-files.ts";
import type { ModelEntry } from "../config/app-config.ts";
import type { Engine, EngineSupport } from "../engines/engine.ts";
import { DeadlineExceeded } from "../errors/aborts.ts";
import { AppError } from "../errors/app-error.ts";
import { DrainRate } from "./drain-rate.ts";
import { KeepAlive } from "./keep-alive.ts";
import { ServiceLog } from "./service-log.ts";
import type { Job, Lease, LoadState, RefusalReason, RunnerObserver, RunnerStats } from "./runner-types.ts";
import { HoldWake, InteractiveHeadroom } from "./slot-holds.ts";
import { openLease, type Ticket } from "./slot-lease.ts";
import { waitInQueue, type Waiter } from "./slot-waiter.ts";
import { VtcQueue } from "./vtc-queue.ts";

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
  /** Interactive leases held (batch leases stand over their share while there are any). */
  private interactiveRunning = 0;
  private readonly headroom: InteractiveHeadroom;
  private readonly holdWake: HoldWake;
  private preparing = 0;
  private readonly queue: VtcQueue<Waiter>;
  private readonly drain: DrainRate;
  private readonly service = new ServiceLog();
  private readonly keepAlive: KeepAlive;
  private drainWaiters: (() => void)[] = [];
  private lastLoadMs = 5000;

  constructor(
    readonly entry: ModelEntry,
    readonly support: EngineSupport,
    private readonly createEngine: (entry: ModelEntry) => Promise<Engine>,
    private readonly log: FastifyBaseLogger,
    private readonly observer?: RunnerObserver,
    /** The scheduler's clock (milliseconds): the queue's ages and the headroom window. */
    private readonly now: () => number = () => performance.now(),
  ) {
    this.queue = new VtcQueue(entry.queueSize, entry.batchMaxWaitMs, now);
    this.headroom = new InteractiveHeadroom(entry.parallel, now);
    this.holdWake = new HoldWake(now, () => this.next());
    this.drain = new DrainRate(entry.parallel);
    this.keepAlive = new KeepAlive(entry.keepAliveMs, () => {
      this.log.info({ model: this.entry.id }, "unloading idle model");
      void this.unload();
    });
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
      tenants: this.service.tenants(this.queue.view()),
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
        if (this.active === 0) this.keepAlive.restart();
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
    this.keepAlive.stop();
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
   * 503 model_loading, the prepare step's 400s, 503 overloaded (queue or prepare stage full, no slot within
   * maxQueueWait or the request deadline), and whatever the work throws; the slots are released in every case.
   */
  async execute<P, R>(job: Job<P, R>): Promise<R> {
    const engine = this.servable();
    const prepared = await this.prepareStage(() => job.prepare(engine, job.signal));
    job.signal.throwIfAborted();
    const ticket: Ticket = { account: job.account ?? job.queueKey, weight: job.weight ?? 1, priority: job.priority ?? "interactive" };
    let lease: Lease;
    const waitStarted = this.now();
    try {
      lease = await this.admit(ticket, job.signal, job.slots?.(prepared) ?? 1, job.onQueued);
      this.observer?.queueWait(this.entry.id, (this.now() - waitStarted) / 1000, ticket.priority);
    } catch (err) {
      if (err instanceof DeadlineExceeded) throw this.refuse("no_capacity", `The model '${this.entry.id}' had no free capacity within the request deadline.`);
      throw err;
    }
    try {
      // The model was reloaded while this request prepared: its prepared state belongs to the old engine.
      if (lease.engine !== engine) throw this.loadingError();
      lease.charge(job.cost?.(prepared) ?? 0);
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
   * The admit step: takes up to `wanted` free slots (at least one), or waits in the account-fair queue for one.
   * Throws 503 overloaded when the queue is full (after the push-out rule), when the estimated wait is already
   * past maxQueueWait, or when no slot came within it; and the signal's reason when it aborts while waiting.
   */
  private admit(ticket: Ticket, signal: AbortSignal, wanted = 1, onQueued?: () => void): Promise<Lease> {
    const engine = this.servable();
    signal.throwIfAborted();
    const interactive = ticket.priority === "interactive";
    if (interactive) this.headroom.interactiveArrived();
    const want = Math.max(1, Math.min(wanted, interactive ? this.entry.parallel : this.batchSlotsFree()));
    const free = this.slotsFor(engine, ticket.account);
    // A slot free while others wait is held from each of them (headroom, reserve): interactive work not held takes it.
    const mayStart = free > 0 && (interactive || (this.queue.size === 0 && this.batchSlotsFree() > 0));
    // Beyond `parallel` (a place the engine can pause for), a grant is one slot.
    const beyond = interactive && this.pausedPlaceFree(engine) && this.queue.preempts(ticket.account, ticket.weight, this.entry.parallel);
    if (mayStart || beyond) {
      this.queue.started(ticket.account, ticket.weight, ticket.priority);
      return Promise.resolve(this.grant(engine, Math.min(want, free), ticket));
    }
    if (interactive) {
      const estimate = this.estimatedWaitMs(ticket);
      if (estimate !== null && estimate > this.entry.maxQueueWaitMs) {
        throw this.refuse("deadline", `The model '${this.entry.id}' cannot start the request within its maxQueueWait.`, estimate);
      }
    }
    if (this.queue.full) {
      const victim = this.queue.pushOutFor(ticket.account, ticket.weight);
      if (!victim) throw this.refuse("queue_full", `The model '${this.entry.id}' is at capacity.`);
      this.queue.remove(victim);
      victim.item.reject(this.refuse("queue_full", `The model '${this.entry.id}' is at capacity.`));
    }
    onQueued?.();
    // Batch waiters may wait out the age bound that lets them in.
    const maxWaitMs = interactive ? this.entry.maxQueueWaitMs : Math.max(this.entry.maxQueueWaitMs, this.entry.batchMaxWaitMs + 1000);
    const waiting = waitInQueue(this.queue, ticket, want, signal, maxWaitMs, () =>
      this.refuse("deadline", `The model '${this.entry.id}' had no free capacity within its maxQueueWait.`),
    );
    // A slot may be free while only batch work waited for it (the headroom): the fair order decides who takes it.
    if (this.active < this.entry.parallel) this.next();
    return waiting;
  }

  /** The estimated wait of a new request of this account: the waiters that go before it ÷ the drain rate. */
  private estimatedWaitMs(ticket: Ticket): number | null {
    const rate = this.drain.perMs();
    if (rate === null) return null;
    return (this.queue.aheadOf(ticket.account, ticket.weight) + 1) / rate;
  }

  /**
   * A 503 overloaded, counted by reason. Retry-After: the time the queue takes to drain at its recent rate
   * (the waiters now ÷ completions per second, at least 1 s), or the given estimate.
   */
  private refuse(reason: RefusalReason, message: string, estimateMs?: number): AppError {
    this.observer?.refused(this.entry.id, reason);
    return new AppError("overloaded", { message, routine: true, retryAfterMs: Math.max(1000, Math.ceil(estimateMs ?? this.drain.drainMs(this.queue.size + 1))) });
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
  private prepareStage<P>(prepare: () => P | Promise<P>): P | Promise<P> {
    return this.support.expensivePrepare ? this.boundedPrepare(prepare) : prepare();
  }

  private async boundedPrepare<P>(prepare: () => P | Promise<P>): Promise<P> {
    if (this.preparing >= this.entry.parallel + this.entry.queueSize) throw this.refuse("queue_full", `The model '${this.entry.id}' is at capacity.`);
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

  /**
   * Whether a request may start beyond `parallel`: the engine can pause generations over their share (ShareStanding)
   * and holds fewer requests beyond it than it can.
   */
  private pausedPlaceFree(engine: Engine): boolean {
    return this.active < this.entry.parallel + (engine.pausableSlots ?? 0) && this.active >= this.entry.parallel;
  }

  /** Whether the light-account reserve applies: the engine starts nothing beyond `parallel` (no paused places). */
  private reserves(engine: Engine): boolean {
    return this.entry.parallel > 1 && !(engine.pausableSlots ?? 0);
  }

  /**
   * The free slots an account may take: all but the last while the light-account reserve holds it from the
   * account, and while a light account is about a grant of several never takes it.
   */
  private slotsFor(engine: Engine, account: string): number {
    const free = this.entry.parallel - this.active;
    if (free === 0 || !this.reserves(engine) || this.queue.reserveLapsesAt() === null) return free;
    return free > 1 || this.queue.holdsLastSlotFrom(account, this.entry.parallel) ? free - 1 : free;
  }

  /** Slots batch work may take: the free ones, less the interactive headroom. */
  private batchSlotsFree(): number {
    return this.headroom.batchSlots(this.entry.parallel - this.active);
  }

  private grant(engine: Engine, wanted: number, ticket: Ticket): Lease {
    const slots = Math.max(1, Math.min(wanted, this.entry.parallel - this.active));
    this.active += slots;
    const interactive = ticket.priority === "interactive";
    if (interactive) this.interactiveRunning++;
    this.keepAlive.stop();
    return openLease(engine, slots, {
      overShare: () => (!interactive && this.interactiveRunning > 0) || this.queue.overShare(ticket.account, this.entry.parallel),
      favoured: () => this.queue.favoured(ticket.account, this.entry.parallel),
      served: (tokens) => {
        this.queue.charge(ticket.account, tokens);
        this.service.served(ticket.account, tokens);
        this.observer?.served(this.entry.id, ticket.account, ticket.priority, tokens);
      },
      freed: (heldMs) => {
        this.active -= slots;
        if (interactive) this.interactiveRunning--;
        this.queue.finished(ticket.account);
        this.drain.released(heldMs);
        this.next();
      },
    });
  }

  private next(): void {
    while (this.active < this.entry.parallel && this.queue.size > 0) {
      const last = this.entry.parallel - this.active === 1 && this.engine && this.reserves(this.engine);
      const entry = this.queue.shift(this.batchSlotsFree() > 0, last ? this.entry.parallel : undefined);
      if (!entry) {
        // The free slot is held (interactive headroom, light-account reserve) from every waiter, for now.
        this.holdWake.atEarliest([this.headroom.endsAt(), this.queue.batchDueAt(), this.queue.reserveLapsesAt()]);
        break;
      }
      const waiter = entry.item;
      if (this.#state === "ready" && this.engine) {
        const wanted = Math.min(waiter.wanted, this.slotsFor(this.engine, entry.account));
        waiter.resolve(this.grant(this.engine, wanted, { account: entry.account, weight: waiter.weight, priority: entry.priority }));
      } else {
        this.queue.finished(entry.account);
        waiter.reject(this.loadingError());
      }
    }
    // A place beyond `parallel` freed: an account under its share that waited for one starts now.
    if (this.engine && this.#state === "ready" && this.pausedPlaceFree(this.engine)) {
      const entry = this.queue.shiftPreempting(this.entry.parallel);
      if (entry) entry.item.resolve(this.grant(this.engine, 1, { account: entry.account, weight: entry.item.weight, priority: entry.priority }));
    }
    if (this.active === 0) {
      for (const resolve of this.drainWaiters.splice(0)) resolve();
      if (this.#state === "ready") this.keepAlive.restart();
      else this.keepAlive.stop();
    }
  }
}
