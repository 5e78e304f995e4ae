import { appendFileSync, readdirSync, writeFileSync } from "node:fs";
import { Agent } from "undici";
import type { Topology } from "./topology.ts";
import type { SpawnedServer } from "../../harness/server.ts";
import { metricsToken } from "./topology.ts";
import { FullGcCollector, inspectorUrl, statusBytes } from "../../harness/full-gc.ts";

/** One replica's sample: memory, event loop, descriptors and handles, and its answers per second by status since the last. */
export interface Sample {
  t: number;
  replica: number;
  pid: number;
  rss: number;
  /** RSS split as the kernel counts it (/proc/PID/status): anonymous memory (heaps, allocator, JIT code) and mapped files (model weights, libraries), whose pages come and go with the page cache. */
  rssAnon: number;
  rssFile: number;
  heapUsed: number;
  /** What V8 holds from the system for its heap, used or not: RSS that moves with it is V8's, not the allocator's. */
  heapTotal: number;
  /** Compiled code: it grows as paths are first run and optimised (warm-up), then levels off. */
  codeSpace: number;
  /** The young generation V8 holds (it grows under allocation pressure, to a fixed ceiling) and the old one. */
  newSpaceTotal: number;
  oldSpaceTotal: number;
  /** The worker threads' V8 heaps (ONNX, audio decoding), held and used: RSS has them, heapTotal does not. */
  workerHeapTotal: number;
  workerHeapUsed: number;
  external: number;
  heapAfterGc: number;
  rssAfterGc: number;
  /** Heap used and RSS just after a full GC the sampler forced (NaN when the inspector did not answer): the leak readings. */
  heapAfterFullGc: number;
  rssAfterFullGc: number;
  loopP99Ms: number;
  fds: number;
  handles: number;
  /** Answers per second since the previous sample of the same process, by status ("200": 12.3). */
  rps: Record<string, number>;
}

export const sampleColumns = ["t", "replica", "pid", "rss", "rssAnon", "rssFile", "heapUsed", "heapTotal", "codeSpace", "newSpaceTotal", "oldSpaceTotal", "workerHeapTotal", "workerHeapUsed", "external", "heapAfterGc", "rssAfterGc", "heapAfterFullGc", "rssAfterFullGc", "loopP99Ms", "fds", "handles", "rps"] as const;

/** One series of a metric, by the exact label text (`space="code"`). */
export function series(text: string, name: string, labels: string): number {
  const prefix = `${name}{${labels}}`;
  const line = text.split("\n").find((l) => l.startsWith(prefix));
  return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : Number.NaN;
}

/** A metric's value (the sum over its series when it has labels), from Prometheus text. */
export function metric(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split("\n")) if (line.startsWith(`${name} `) || line.startsWith(`${name}{`)) sum += Number(line.slice(line.lastIndexOf(" ") + 1));
  return sum;
}

function requestsByStatus(text: string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const line of text.split("\n")) {
    if (!line.startsWith("modelgate_requests_total{")) continue;
    const status = /status="(\d+)"/.exec(line)?.[1] ?? "?";
    counts[status] = (counts[status] ?? 0) + Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return counts;
}

function openFds(pid: number): number {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return Number.NaN;
  }
}

/**
 * Samples every replica every `everyMs` through its own /metrics (the metrics token), into `csvFile`; each time it
 * also forces a full GC in each (its worker threads, then its main thread) through its inspector and reads heap and
 * RSS just after (decision 0048), through one inspector connection per process, kept open (full-gc.ts: each new one
 * would leave an inspector session in every worker thread).
 */
export class Sampler {
  readonly samples: Sample[] = [];
  private readonly last = new Map<number, { t: number; counts: Record<string, number> }>();
  /** Per process (a restarted replica is a new one); a connection that failed is made again at the next sample. */
  private readonly collectors = new Map<number, Promise<FullGcCollector>>();
  private readonly agent: Agent;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly topology: Topology,
    private readonly csvFile: string,
    ca: string,
  ) {
    this.agent = new Agent({ connect: { ca } });
    writeFileSync(csvFile, sampleColumns.join(",") + "\n");
  }

  start(everyMs = 10_000): void {
    void this.sampleAll();
    this.timer = setInterval(() => void this.sampleAll(), everyMs);
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.sampleAll();
    await this.agent.close();
    for (const collector of this.collectors.values()) void collector.then((c) => c.close(), () => {});
  }

  private async afterFullGc(server: SpawnedServer) {
    const pid = server.child.pid!;
    let collector = this.collectors.get(pid);
    if (!collector) this.collectors.set(pid, (collector = FullGcCollector.connect(inspectorUrl(server.stderr), pid)));
    try {
      return await (await collector).collect();
    } catch (err) {
      this.collectors.delete(pid);
      void collector.then((c) => c.close(), () => {});
      throw err;
    }
  }

  async sampleAll(): Promise<void> {
    await Promise.all(this.topology.replicas.map((replica, index) => this.sampleOne(index, replica).catch(() => {})));
  }

  private async sampleOne(replica: number, server: SpawnedServer): Promise<void> {
    const pid = server.child.pid!;
    const res = await fetch(`${server.origin}/metrics`, { headers: { authorization: `Bearer ${metricsToken}` }, dispatcher: this.agent } as RequestInit);
    const text = await res.text();
    // After the scrape, so that the ordinary readings are the process as it runs.
    const reading = await this.afterFullGc(server).catch(() => null);
    const t = Date.now();
    const counts = requestsByStatus(text);
    const before = this.last.get(pid);
    const rps: Record<string, number> = {};
    if (before) for (const [status, n] of Object.entries(counts)) rps[status] = (n - (before.counts[status] ?? 0)) / ((t - before.t) / 1000);
    this.last.set(pid, { t, counts });
    const status = statusBytes(pid, ["RssAnon", "RssFile"]);
    const sample: Sample = {
      t,
      replica,
      pid,
      rss: metric(text, "modelgate_process_resident_memory_bytes"),
      rssAnon: status.RssAnon,
      rssFile: status.RssFile,
      heapUsed: metric(text, "modelgate_nodejs_heap_size_used_bytes"),
      heapTotal: metric(text, "modelgate_nodejs_heap_size_total_bytes"),
      codeSpace: series(text, "modelgate_nodejs_heap_space_size_used_bytes", 'space="code"'),
      newSpaceTotal: series(text, "modelgate_nodejs_heap_space_size_total_bytes", 'space="new"'),
      oldSpaceTotal: series(text, "modelgate_nodejs_heap_space_size_total_bytes", 'space="old"'),
      workerHeapTotal: series(text, "modelgate_worker_heap_bytes", 'kind="total"'),
      workerHeapUsed: series(text, "modelgate_worker_heap_bytes", 'kind="used"'),
      external: metric(text, "modelgate_nodejs_external_memory_bytes"),
      heapAfterGc: metric(text, "modelgate_heap_used_after_major_gc_bytes"),
      rssAfterGc: metric(text, "modelgate_rss_after_major_gc_bytes"),
      heapAfterFullGc: reading?.heap ?? Number.NaN,
      rssAfterFullGc: reading?.rss ?? Number.NaN,
      loopP99Ms: metric(text, "modelgate_nodejs_eventloop_lag_p99_seconds") * 1000,
      fds: openFds(pid),
      handles: metric(text, "modelgate_nodejs_active_handles_total"),
      rps,
    };
    this.samples.push(sample);
    const cells = sampleColumns.map((c) => (c === "rps" ? Object.entries(rps).map(([s, v]) => `${s}:${v.toFixed(2)}`).join(" ") : String(sample[c])));
    appendFileSync(this.csvFile, cells.join(",") + "\n");
  }
}
