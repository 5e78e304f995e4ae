import { Worker, type ResourceLimits } from "node:worker_threads";
import { AppError } from "../errors/app-error.ts";
import { errorCatalog, type ErrorCode } from "../errors/catalog.ts";
import { AsyncQueue } from "./async-queue.ts";
import type { FromWorker, SerializedError, ToWorker, WorkerData } from "./worker-protocol.ts";

/**
 * Compiled builds (dist/) run .js files: a task module named by its .ts source path runs as the .js beside it, and
 * the worker starts at worker-main.js. Under tsx the worker starts at worker-bootstrap.mjs, which registers tsx.
 */
const compiled = import.meta.url.endsWith(".js");
const workerEntry = compiled ? new URL("./worker-main.js", import.meta.url) : new URL("./worker-bootstrap.mjs", import.meta.url);
const runnableModule = (file: string) => (compiled ? file.replace(/\.ts$/, ".js") : file);

export interface WorkerPoolOptions {
  size: number;
  /** Absolute file path of a .ts (or .js) module exporting `init(initArg)` and async task functions. */
  taskModule: string;
  /** Structured-cloneable argument of the task module's `init`. */
  init: unknown;
  /**
   * Modules the main thread must have loaded before any worker loads them (transformers.js loads sharp in every
   * worker, and sharp must be loaded on the main thread first: sharp#2263).
   */
  preloadOnMainThread?: (() => Promise<unknown>)[];
  /** Names the threads (`<name>-worker-<i>`) in messages and debuggers. */
  name?: string;
  /**
   * Heap limits of each worker. Past them the worker is stopped (its calls reject with WorkerCrashedError,
   * `outOfMemory`) and replaced. They bound the V8 heap only: typed arrays and WASM memory are not counted.
   */
  resourceLimits?: ResourceLimits;
}

export interface CallOptions {
  signal?: AbortSignal;
  transfer?: Transferable[];
  /** Receives what the task emits (TaskContext.emit) before it returns. */
  onEvent?: (value: unknown) => void;
}

/**
 * Every worker thread of every pool in this process while it lives, with its last heap reading (their V8 heaps are
 * not in process.memoryUsage()).
 */
const liveWorkers = new Map<Worker, { total: number; used: number }>();
/** A worker answers a reading between tasks: one busy longer than this counts with its last reading. */
const heapReadingWaitMs = 250;

async function readHeap(worker: Worker): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<null>((resolve) => (timer = setTimeout(resolve, heapReadingWaitMs, null)));
  const stats = await Promise.race([worker.getHeapStatistics().catch(() => null), late]);
  clearTimeout(timer);
  if (stats && liveWorkers.has(worker)) liveWorkers.set(worker, { total: stats.total_heap_size, used: stats.used_heap_size });
}

/** The V8 heaps of this process's worker threads, summed: what they hold and what they use (metrics; issue 47). */
export async function workerHeaps(): Promise<{ workers: number; total: number; used: number }> {
  await Promise.all([...liveWorkers.keys()].map(readHeap));
  const heaps = [...liveWorkers.values()];
  return { workers: heaps.length, total: heaps.reduce((n, h) => n + h.total, 0), used: heaps.reduce((n, h) => n + h.used, 0) };
}

/** An error a task threw that is not an AppError; `code` is the worker-side error's code if it had one. */
export class WorkerTaskError extends Error {
  readonly code: string | undefined;
  constructor(error: SerializedError) {
    super(error.message);
    this.name = error.name === "Error" ? "WorkerTaskError" : error.name;
    this.code = error.code;
    if (error.stack) this.stack = `${this.name}: ${error.message}\n    (in a worker thread)\n${error.stack.split("\n").slice(1).join("\n")}`;
  }
}

/** The worker died (crash, OOM, process.exit) with the call in flight. */
export class WorkerCrashedError extends Error {
  constructor(
    message: string,
    /** It was stopped for reaching its heap limit (`resourceLimits`). */
    readonly outOfMemory = false,
  ) {
    super(message);
    this.name = "WorkerCrashedError";
  }
}

interface Pending {
  resolve(value: unknown): void;
  reject(err: unknown): void;
  onEvent?: (value: unknown) => void;
  /** The caller gave up (abort); the worker may still be computing, so it still counts as busy. */
  abandoned: boolean;
  cleanup(): void;
}

interface Slot {
  index: number;
  worker: Worker | null;
  ready: Promise<void> | null;
  inflight: Map<number, Pending>;
  /** Calls that picked this slot and wait for its worker to be ready. */
  reserved: number;
  lastError: Error | null;
}

/** Rebuilds an error thrown in a worker: AppError-like errors become AppError again, so they reach the client as 4xx. */
export function reviveError(error: SerializedError): Error {
  if (error.code !== undefined && error.code in errorCatalog) {
    return new AppError(error.code as ErrorCode, { param: error.param ?? null, message: error.message });
  }
  return new WorkerTaskError(error);
}

/**
 * Node flags passed on to workers. Workers load .ts through worker-bootstrap.mjs, which registers tsx itself,
 * so tsx flags are dropped to avoid registering it twice. Only loader-ish flags pass: workers refuse process-wide ones, and test-runner
 * flags must not reach them.
 */
export function workerExecArgv(parent: readonly string[] = process.execArgv): string[] {
  const withValue = new Set(["--import", "--require", "-r", "--loader", "--experimental-loader", "--conditions", "-C"]);
  const bare = (a: string) => a === "--enable-source-maps" || a === "--no-warnings" || a.startsWith("--experimental-") || a.startsWith("--no-experimental-");
  const isTsx = (value: string) => value === "tsx" || value.startsWith("tsx/") || /[\\/]tsx[\\/]/.test(value);
  const out: string[] = [];
  for (let i = 0; i < parent.length; i++) {
    const arg = parent[i];
    const name = arg.split("=", 1)[0];
    if (withValue.has(name)) {
      const value = arg.includes("=") ? arg.slice(name.length + 1) : parent[++i];
      if (value !== undefined && !isTsx(value)) out.push(name, value);
    } else if (bare(name)) {
      out.push(arg);
    }
  }
  return out;
}

/**
 * A fixed set of worker threads running one task module. CPU-bound work (ONNX inference, audio decoding) blocks
 * its thread, so it runs here,
 * off the event loop. Calls go to the least busy worker; an aborted call rejects at once (the worker is told
 * to stop, and its late answer is dropped); a crashed worker rejects its calls and is replaced.
 */
export class WorkerPool {
  private readonly slots: Slot[];
  private nextId = 1;
  private closed = false;
  /** The most calls that were ever in the workers at once (aborted ones still running included). */
  peakInFlight = 0;
  private readonly execArgv = workerExecArgv();

  constructor(private readonly opts: WorkerPoolOptions) {
    if (!Number.isInteger(opts.size) || opts.size < 1) throw new Error("WorkerPool size must be a positive integer");
    this.slots = Array.from({ length: opts.size }, (_, index) => ({ index, worker: null, ready: null, inflight: new Map(), reserved: 0, lastError: null }));
  }

  get size(): number {
    return this.slots.length;
  }

  /** Calls in the workers now, aborted ones still running included. */
  get inFlight(): number {
    return this.slots.reduce((n, s) => n + s.inflight.size, 0);
  }

  /** Starts every worker; resolves when each has run `init`, rejects with the first init error. */
  async start(): Promise<void> {
    if (this.closed) throw new Error("WorkerPool is closed");
    for (const load of this.opts.preloadOnMainThread ?? []) await load();
    try {
      await Promise.all(this.slots.map((slot) => this.spawn(slot)));
    } catch (err) {
      await this.close();
      throw err;
    }
  }

  /** Runs `method(args)` in a worker and resolves with what it returns. */
  async call<T>(method: string, args: unknown, opts: CallOptions = {}): Promise<T> {
    const { signal } = opts;
    if (this.closed) throw new Error("WorkerPool is closed");
    signal?.throwIfAborted();
    const slot = this.leastBusy();
    // Counted as busy from now on, so calls made while this one waits for its worker go elsewhere.
    slot.reserved++;
    let worker: Worker;
    try {
      worker = await this.spawn(slot);
      signal?.throwIfAborted();
    } finally {
      slot.reserved--;
    }
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        const pending = slot.inflight.get(id);
        if (!pending || pending.abandoned) return;
        pending.abandoned = true;
        pending.onEvent = undefined;
        worker.postMessage({ type: "abort", id } satisfies ToWorker);
        reject(signal!.reason);
      };
      const pending: Pending = {
        resolve: resolve as (v: unknown) => void,
        reject,
        onEvent: opts.onEvent,
        abandoned: false,
        cleanup: () => signal?.removeEventListener("abort", onAbort),
      };
      slot.inflight.set(id, pending);
      this.peakInFlight = Math.max(this.peakInFlight, this.inFlight);
      this.refresh(slot);
      signal?.addEventListener("abort", onAbort, { once: true });
      try {
        worker.postMessage({ type: "call", id, method, args } satisfies ToWorker, opts.transfer as never);
      } catch (err) {
        slot.inflight.delete(id);
        pending.cleanup();
        this.refresh(slot);
        reject(err);
      }
    });
  }

  /** Runs a task that emits pieces (TaskContext.emit) and yields them as they come; the return value is dropped. */
  async *stream<E>(method: string, args: unknown, opts: { signal?: AbortSignal; transfer?: Transferable[] } = {}): AsyncGenerator<E> {
    const events = new AsyncQueue<E>();
    let finished = false;
    const inner = new AbortController();
    const onOuterAbort = () => inner.abort(opts.signal!.reason);
    if (opts.signal?.aborted) inner.abort(opts.signal.reason);
    opts.signal?.addEventListener("abort", onOuterAbort, { once: true });
    void this.call<unknown>(method, args, { signal: inner.signal, transfer: opts.transfer, onEvent: (value) => events.push(value as E) }).then(
      () => {
        finished = true;
        events.end();
      },
      (err) => {
        finished = true;
        events.end(err ?? new Error("worker call failed"));
      },
    );
    try {
      yield* events;
    } finally {
      opts.signal?.removeEventListener("abort", onOuterAbort);
      // The consumer stopped early (break/return/throw): stop the worker-side task too.
      if (!finished) inner.abort(new Error("stream consumer stopped"));
    }
  }

  /**
   * Refuses new calls, waits up to `graceMs` for calls still running (aborted ones included), then terminates every
   * worker; calls still in flight then reject. Terminating a worker inside a native onnxruntime run aborts the
   * whole process, hence the wait.
   */
  async close(graceMs = 30_000): Promise<void> {
    this.closed = true;
    const deadline = Date.now() + graceMs;
    while (this.slots.some((slot) => slot.worker && slot.inflight.size > 0) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    await Promise.all(
      this.slots.map(async (slot) => {
        const worker = slot.worker;
        slot.worker = null;
        slot.ready = null;
        this.failInflight(slot, new Error("WorkerPool closed"));
        if (worker) await worker.terminate();
      }),
    );
  }

  /** In-flight calls per worker (abandoned ones included), for tests and stats. */
  load(): number[] {
    return this.slots.map((s) => s.inflight.size);
  }

  private leastBusy(): Slot {
    let best = this.slots[0];
    for (const slot of this.slots) {
      // Prefer a live worker over one that has to be (re)spawned when load is equal.
      const score = (slot.inflight.size + slot.reserved) * 2 + (slot.worker ? 0 : 1);
      const bestScore = (best.inflight.size + best.reserved) * 2 + (best.worker ? 0 : 1);
      if (score < bestScore) best = slot;
    }
    return best;
  }

  /** Returns the slot's worker once ready, spawning it if needed. */
  private async spawn(slot: Slot): Promise<Worker> {
    if (this.closed) throw new Error("WorkerPool is closed");
    if (!slot.ready) {
      const data: WorkerData = { taskModule: runnableModule(this.opts.taskModule), init: this.opts.init };
      const worker = new Worker(workerEntry, {
        execArgv: this.execArgv,
        workerData: data,
        name: `${this.opts.name ?? "task"}-worker-${slot.index}`,
        resourceLimits: this.opts.resourceLimits,
      });
      slot.worker = worker;
      liveWorkers.set(worker, { total: 0, used: 0 });
      worker.once("exit", () => liveWorkers.delete(worker));
      slot.ready = new Promise<void>((resolve, reject) => {
        let isReady = false;
        worker.on("message", (msg: FromWorker) => {
          if (msg.type === "ready") {
            isReady = true;
            slot.lastError = null;
            this.refresh(slot);
            resolve();
          } else if (msg.type === "init-error") {
            const err = reviveError(msg.error);
            slot.lastError = err;
            reject(err);
            void worker.terminate();
          } else {
            this.onMessage(slot, msg);
          }
        });
        worker.on("error", (err) => {
          slot.lastError = err;
          if (!isReady) reject(err);
        });
        worker.on("exit", (code) => {
          if (slot.worker !== worker) return;
          slot.worker = null;
          slot.ready = null;
          const cause = slot.lastError ? `: ${slot.lastError.message}` : "";
          if (!isReady) reject(slot.lastError ?? new WorkerCrashedError(`worker exited during init (code ${code})`));
          const outOfMemory = (slot.lastError as NodeJS.ErrnoException | null)?.code === "ERR_WORKER_OUT_OF_MEMORY";
          this.failInflight(slot, new WorkerCrashedError(`worker exited unexpectedly (code ${code})${cause}`, outOfMemory));
          // Replace a worker that died while serving, so capacity comes back before the next call needs it.
          if (isReady && !this.closed) this.spawn(slot).catch(() => {});
        });
      });
      // A failed start is reported to whoever awaits; the slot is retried on the next call.
      slot.ready.catch(() => {
        if (slot.worker === worker) {
          slot.worker = null;
          slot.ready = null;
        }
      });
    }
    await slot.ready;
    if (!slot.worker) throw slot.lastError ?? new WorkerCrashedError("worker is not running");
    return slot.worker;
  }

  private onMessage(slot: Slot, msg: FromWorker): void {
    if (msg.type !== "result" && msg.type !== "error" && msg.type !== "event") return;
    const pending = slot.inflight.get(msg.id);
    if (!pending) return;
    if (msg.type === "event") {
      pending.onEvent?.(msg.value);
      return;
    }
    slot.inflight.delete(msg.id);
    pending.cleanup();
    this.refresh(slot);
    if (pending.abandoned) return;
    if (msg.type === "result") pending.resolve(msg.value);
    else pending.reject(reviveError(msg.error));
  }

  private failInflight(slot: Slot, err: Error): void {
    const pending = [...slot.inflight.values()];
    slot.inflight.clear();
    for (const p of pending) {
      p.cleanup();
      if (!p.abandoned) p.reject(err);
    }
  }

  /** An idle worker must not keep the process alive; a busy one must. */
  private refresh(slot: Slot): void {
    if (!slot.worker) return;
    if (slot.inflight.size > 0) slot.worker.ref();
    else slot.worker.unref();
  }
}
