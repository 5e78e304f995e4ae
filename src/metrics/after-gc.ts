import { constants, PerformanceObserver } from "node:perf_hooks";
import { Gauge, type Registry } from "prom-client";
import { workerHeaps } from "../workers/worker-pool.ts";
import { enableNativeMemoryTrim, trimAfterMajorGc } from "./native-memory-trim.ts";

/** Heap used and RSS read just after the last major (mark-sweep-compact) GC: the memory that is really held. */
const afterMajorGc = { heapUsed: 0, rss: 0 };
let observer: PerformanceObserver | null = null;

/**
 * One observer per process, whatever the number of servers in it (tests build many). On a major GC it trims glibc's
 * heaps first (when `trimNativeMemory` enabled it; or schedules the trim, when one ran within the last second).
 */
function observeGc(): void {
  if (observer) return;
  observer = new PerformanceObserver((list) => {
    const major = list.getEntries().some((e) => (e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR);
    if (!major) return;
    trimAfterMajorGc();
    const memory = process.memoryUsage();
    afterMajorGc.heapUsed = memory.heapUsed;
    afterMajorGc.rss = memory.rss;
  });
  observer.observe({ entryTypes: ["gc"] });
}

/** Trims glibc's heaps after each major GC from now on (native-memory-trim.ts), with or without metrics. */
export async function trimNativeMemoryAfterGc(): Promise<Awaited<ReturnType<typeof enableNativeMemoryTrim>>> {
  const result = await enableNativeMemoryTrim();
  if (result.enabled) observeGc();
  return result;
}

/**
 * `modelgate_heap_used_after_major_gc_bytes` and `modelgate_rss_after_major_gc_bytes` (0 until the first major GC):
 * a leak shows as a rising floor, which heap used alone hides under garbage not yet collected (issue 47).
 */
export function registerAfterGcGauges(registry: Registry): void {
  observeGc();
  new Gauge({
    name: "modelgate_heap_used_after_major_gc_bytes",
    help: "V8 heap used just after the last major (mark-sweep-compact) garbage collection",
    registers: [registry],
    collect() {
      this.set(afterMajorGc.heapUsed);
    },
  });
  new Gauge({
    name: "modelgate_rss_after_major_gc_bytes",
    help: "Resident set size just after the last major garbage collection",
    registers: [registry],
    collect() {
      this.set(afterMajorGc.rss);
    },
  });
}

/**
 * The worker threads' V8 heaps (ONNX inference, audio decoding): each thread has its own, which the process's heap
 * metrics leave out while RSS holds them. Read at scrape time.
 */
export function registerWorkerHeapGauges(registry: Registry): void {
  // Both gauges are collected at once on a scrape: they share one reading of the workers.
  let reading: ReturnType<typeof workerHeaps> | null = null;
  const read = () => (reading ??= workerHeaps().finally(() => (reading = null)));
  new Gauge({
    name: "modelgate_worker_heap_bytes",
    help: "V8 heap of the worker threads (all pools), summed: total (held from the system) or used",
    labelNames: ["kind"],
    registers: [registry],
    async collect() {
      const heaps = await read();
      this.set({ kind: "total" }, heaps.total);
      this.set({ kind: "used" }, heaps.used);
    },
  });
  new Gauge({
    name: "modelgate_worker_threads",
    help: "Worker threads alive (all pools)",
    registers: [registry],
    async collect() {
      this.set((await read()).workers);
    },
  });
}
