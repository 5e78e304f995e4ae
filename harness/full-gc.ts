import { readFileSync } from "node:fs";

/** The node flag that lets `afterFullGc` reach a child: its inspector, on loopback, at a port the kernel picks. */
export const inspectFlag = "--inspect=127.0.0.1:0";

/** The debugger address a process started with `inspectFlag` printed on stderr ("Debugger listening on ws://…"). */
export function inspectorUrl(stderr: readonly string[]): string {
  const match = /Debugger listening on (ws:\/\/\S+)/.exec(stderr.join(""));
  if (!match) throw new Error("the process printed no inspector address: start it with " + inspectFlag);
  return match[1]!;
}

export interface FullGcReading {
  /** V8 heap used just after the collection: what the process really holds in JS. */
  heap: number;
  /** Resident set size `trimWaitMs` after it (/proc/PID/status VmRSS). */
  rss: number;
  /** How long the process was paused for it, as seen from here. */
  pauseMs: number;
}

/** Fields of /proc/PID/status in bytes (they are in kB there), read at once; NaN for one that cannot be read. */
export function statusBytes<F extends string>(pid: number, fields: readonly F[]): Record<F, number> {
  let status = "";
  try {
    status = readFileSync(`/proc/${pid}/status`, "utf8");
  } catch {}
  const bytes = (field: F) => {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(status);
    return match ? Number(match[1]) * 1024 : Number.NaN;
  };
  return Object.fromEntries(fields.map((f) => [f, bytes(f)])) as Record<F, number>;
}

/**
 * Full garbage collections forced in another process through one inspector connection, kept open
 * (HeapProfiler.collectGarbage: V8 collects all it can, compacts, and shrinks the young generation): `collect()` runs
 * one in each of its worker threads and then in the main thread, reads the main thread's heap used at once, and its
 * RSS once the process has had `trimWaitMs` to trim glibc's heaps after that GC (server.trimNativeMemory does so on
 * the event loop's next turns, after the collection's performance entry is delivered, or at most a second later
 * when it trimmed just before). Read this way, every reading is taken in the same state, which V8's own major GCs
 * are not (issue 47: only some of them shrink the young generation, by up to 30 MB of RSS).
 *
 * The worker threads are reached through NodeWorker.enable, once per connection: Node connects an inspector
 * session inside every worker thread at each enable and frees none of them after the disable, about 20 KB a worker
 * each time (issue 47: jemalloc's profiler showed the soak's sampler, enabling them every 10 s, growing an idle
 * replica 1.2 MB per 10 minutes with them). Workers that start later attach to the same connection.
 */
export class FullGcCollector {
  private readonly pending = new Map<number, (result: unknown) => void>();
  /** The workers' sessions (NodeWorker.attachedToWorker), and their answers, relayed by the main one. */
  private readonly workers = new Set<string>();
  private readonly workerPending = new Map<string, () => void>();
  private nextId = 1;
  private readonly closed: Promise<never>;

  private constructor(
    private readonly socket: WebSocket,
    private readonly pid: number,
    private readonly timeoutMs: number,
  ) {
    this.closed = new Promise<never>((_, reject) => {
      socket.addEventListener("error", () => reject(new Error(`inspector ${socket.url} unreachable`)));
      socket.addEventListener("close", () => reject(new Error(`inspector ${socket.url} closed`)));
    });
    this.closed.catch(() => {});
    socket.addEventListener("message", (event) => this.received(String(event.data)));
  }

  /** Connects to the inspector at `url` (of process `pid`) and attaches its worker threads. */
  static async connect(url: string, pid: number, timeoutMs = 10_000): Promise<FullGcCollector> {
    const collector = new FullGcCollector(new WebSocket(url), pid, timeoutMs);
    try {
      await collector.bounded(new Promise((resolve) => collector.socket.addEventListener("open", resolve)));
      // Node reports the workers already running while answering.
      await collector.call("NodeWorker.enable", { waitForDebuggerOnStart: false });
    } catch (err) {
      collector.close();
      throw err;
    }
    return collector;
  }

  async collect(trimWaitMs = 1200): Promise<FullGcReading> {
    const started = performance.now();
    // The workers first, so that the main thread's collection (after which the process trims glibc's heaps) comes last.
    await Promise.all([...this.workers].map((sessionId) => this.collectInWorker(sessionId)));
    await this.call("HeapProfiler.collectGarbage");
    const pauseMs = performance.now() - started;
    const usage = await this.call<{ usedSize: number }>("Runtime.getHeapUsage");
    await new Promise((resolve) => setTimeout(resolve, trimWaitMs));
    return { heap: usage.usedSize, rss: statusBytes(this.pid, ["VmRSS"]).VmRSS, pauseMs };
  }

  close(): void {
    this.socket.close();
  }

  private received(data: string): void {
    const message = JSON.parse(data) as { id?: number; result?: unknown; method?: string; params?: { sessionId: string; message?: string } };
    if (message.id !== undefined) {
      this.pending.get(message.id)?.(message.result);
      this.pending.delete(message.id);
    } else if (message.method === "NodeWorker.attachedToWorker") this.workers.add(message.params!.sessionId);
    else if (message.method === "NodeWorker.detachedFromWorker") {
      // A worker that exits meanwhile (it failed, or its pool closed) answers nothing more: nothing is left to collect.
      this.workers.delete(message.params!.sessionId);
      for (const key of this.workerPending.keys()) if (key.startsWith(`${message.params!.sessionId}:`)) this.workerAnswered(key);
    } else if (message.method === "NodeWorker.receivedMessageFromWorker") {
      const inner = JSON.parse(message.params!.message!) as { id?: number };
      this.workerAnswered(`${message.params!.sessionId}:${inner.id}`);
    }
  }

  /** A worker's collection is over (answered, or the worker left): the connection lives on, so its entry goes. */
  private workerAnswered(key: string): void {
    this.workerPending.get(key)?.();
    this.workerPending.delete(key);
  }

  /** `work`, or the connection's failure, or a timeout after `timeoutMs`. */
  private bounded<T>(work: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`inspector ${this.socket.url} did not answer in ${this.timeoutMs} ms`)), this.timeoutMs);
    });
    return Promise.race([this.closed, timeout, work]).finally(() => clearTimeout(timer));
  }

  private call<T>(method: string, params?: unknown): Promise<T> {
    return this.bounded(
      new Promise<T>((resolve) => {
        const id = this.nextId++;
        this.pending.set(id, resolve as (result: unknown) => void);
        this.socket.send(JSON.stringify({ id, method, params }));
      }),
    );
  }

  /** A full GC in one worker thread: its isolate holds its own garbage, and the native buffers (tensors) it keeps. */
  private collectInWorker(sessionId: string): Promise<void> {
    return this.bounded(
      new Promise<void>((resolve) => {
        const id = this.nextId++;
        this.workerPending.set(`${sessionId}:${id}`, resolve);
        void this.call("NodeWorker.sendMessageToWorker", { sessionId, message: JSON.stringify({ id, method: "HeapProfiler.collectGarbage" }) });
      }),
    );
  }
}

/** One reading through a connection of its own (FullGcCollector), closed after it. */
export async function afterFullGc(url: string, pid: number, timeoutMs = 10_000, trimWaitMs = 1200): Promise<FullGcReading> {
  const collector = await FullGcCollector.connect(url, pid, timeoutMs);
  try {
    return await collector.collect(trimWaitMs);
  } finally {
    collector.close();
  }
}
