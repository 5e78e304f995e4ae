import { PerformanceObserver, type PerformanceEntry } from "node:perf_hooks";

const tick = 5;

const threadCpuMs = () => {
  const { user, system } = process.threadCpuUsage();
  return (user + system) / 1000;
};

export interface Stall {
  /** The most CPU time the event loop's thread spent between two turns of a 5 ms timer, in ms. */
  ms: number;
  /** The wall time between those two turns (it includes the time the machine did not run the thread). */
  wallMs: number;
  /** Where in `work` it began, ms from its start. */
  atMs: number;
  /** The garbage collector's pauses in it. */
  gcMs: number;
}

/**
 * The longest the event loop was held while `work` ran, as the CPU time its thread spent between two turns of a 5 ms
 * timer: JavaScript, and the garbage collector's work on that thread. A timer cannot fire while code runs, so a
 * synchronous stretch shows whole in one interval (with at most a few ms of the short turns around it). CPU time
 * rather than wall time: on a machine shared with other test runs, a thread that is waiting for a CPU, or for a disk
 * someone else keeps busy, holds no one up by its own code, and wall time cannot tell those apart.
 */
export async function longestStall(work: () => Promise<unknown>): Promise<Stall> {
  const gcs: PerformanceEntry[] = [];
  const observer = new PerformanceObserver((list) => gcs.push(...list.getEntries()));
  observer.observe({ entryTypes: ["gc"] });
  const start = performance.now();
  let last = { at: start, cpu: threadCpuMs() };
  let longest = { ms: 0, from: start, to: start };
  const timer = setInterval(() => {
    const now = { at: performance.now(), cpu: threadCpuMs() };
    if (now.cpu - last.cpu > longest.ms) longest = { ms: now.cpu - last.cpu, from: last.at, to: now.at };
    last = now;
  }, tick);
  try {
    await work();
  } finally {
    clearInterval(timer);
    observer.disconnect();
  }
  const gcMs = gcs.filter((gc) => gc.startTime >= longest.from && gc.startTime < longest.to).reduce((sum, gc) => sum + gc.duration, 0);
  return { ms: longest.ms, wallMs: longest.to - longest.from, atMs: longest.from - start, gcMs };
}

export const describeStall = (s: Stall) =>
  `${s.ms.toFixed(1)} ms of CPU (${s.wallMs.toFixed(0)} ms of wall time) at ${s.atMs.toFixed(0)} ms; garbage collection ${s.gcMs.toFixed(1)} ms of it`;
