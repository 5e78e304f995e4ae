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
 * A full garbage collection forced in another process through its inspector (HeapProfiler.collectGarbage: V8 collects
 * all it can, compacts, and shrinks the young generation), in each of its worker threads and then in the main thread,
 * then the main thread's heap used read at once, and its RSS once the
 * process has had `trimWaitMs` to trim glibc's heaps after that GC (server.trimNativeMemory does so on the event
 * loop's next turns, after the collection's performance entry is delivered, or at most a second later when it trimmed
 * just before). Read this way,
 * every reading is taken in the same state, which V8's own major GCs are not (issue 47: only some of them shrink the
 * young generation, by up to 30 MB of RSS).
 */
export async function afterFullGc(url: string, pid: number, timeoutMs = 10_000, trimWaitMs = 1200): Promise<FullGcReading> {
  const socket = new WebSocket(url);
  const pending = new Map<number, (result: unknown) => void>();
  let nextId = 1;
  const failed = new Promise<never>((_, reject) => {
    socket.addEventListener("error", () => reject(new Error(`inspector ${url} unreachable`)));
    socket.addEventListener("close", () => reject(new Error(`inspector ${url} closed`)));
    setTimeout(() => reject(new Error(`inspector ${url} did not answer in ${timeoutMs} ms`)), timeoutMs).unref();
  });
  failed.catch(() => {});
  // The worker threads' sessions (NodeWorker.attachedToWorker), and their answers, relayed by the main one.
  const workers: string[] = [];
  const workerPending = new Map<string, () => void>();
  socket.addEventListener("message", (event) => {
    const message = JSON.parse(String(event.data)) as { id?: number; result?: unknown; method?: string; params?: { sessionId: string; message?: string } };
    if (message.id !== undefined) pending.get(message.id)?.(message.result);
    else if (message.method === "NodeWorker.attachedToWorker") workers.push(message.params!.sessionId);
    else if (message.method === "NodeWorker.detachedFromWorker") {
      // A worker that exits meanwhile (it failed, or its pool closed) answers nothing more: nothing is left to collect.
      for (const [key, resolve] of workerPending) if (key.startsWith(`${message.params!.sessionId}:`)) resolve();
    } else if (message.method === "NodeWorker.receivedMessageFromWorker") {
      const inner = JSON.parse(message.params!.message!) as { id?: number };
      if (inner.id !== undefined) workerPending.get(`${message.params!.sessionId}:${inner.id}`)?.();
    }
  });
  const call = <T>(method: string, params?: unknown) =>
    Promise.race([
      failed,
      new Promise<T>((resolve) => {
        const id = nextId++;
        pending.set(id, resolve as (result: unknown) => void);
        socket.send(JSON.stringify({ id, method, params }));
      }),
    ]);
  /** A full GC in one worker thread: its isolate holds its own garbage, and the native buffers (tensors) it keeps. */
  const collectInWorker = (sessionId: string) =>
    Promise.race([
      failed,
      new Promise<void>((resolve) => {
        const id = nextId++;
        workerPending.set(`${sessionId}:${id}`, resolve);
        void call("NodeWorker.sendMessageToWorker", { sessionId, message: JSON.stringify({ id, method: "HeapProfiler.collectGarbage" }) });
      }),
    ]);
  try {
    await Promise.race([failed, new Promise((resolve) => socket.addEventListener("open", resolve))]);
    const started = performance.now();
    // The workers first, so that the main thread's collection (after which the process trims glibc's heaps) comes
    // last. Node reports the workers already running while answering NodeWorker.enable.
    await call("NodeWorker.enable", { waitForDebuggerOnStart: false });
    await Promise.all(workers.map(collectInWorker));
    await call("NodeWorker.disable");
    await call("HeapProfiler.collectGarbage");
    const pauseMs = performance.now() - started;
    const usage = await call<{ usedSize: number }>("Runtime.getHeapUsage");
    await new Promise((resolve) => setTimeout(resolve, trimWaitMs));
    const rss = statusBytes(pid, ["VmRSS"]).VmRSS;
    return { heap: usage.usedSize, rss, pauseMs };
  } finally {
    socket.close();
  }
}
