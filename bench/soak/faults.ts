import { appendFileSync } from "node:fs";
import { plans, type Topology } from "./topology.ts";

/** One injected fault, as logged: its window is [start, end] in epoch ms. */
export interface FaultWindow {
  name: string;
  start: number;
  end: number;
  /** Which answers the fault makes right: an in-process model's 503 only while the database is away (a new key cannot be checked). */
  kind: "upstream" | "redis" | "database" | "replica" | "reload";
}

interface Fault {
  name: string;
  kind: FaultWindow["kind"];
  /** Seconds the fault lasts (0: a single event). */
  seconds: number;
  begin(t: Topology): Promise<void> | void;
  finish(t: Topology): Promise<void> | void;
}

/**
 * The faults of issue 47, in the order they are injected; the replica is killed while the batch runs. The replica kill
 * comes first: the restarted process warms up (V8's compiled code and feedback, glibc's heaps under load) for 15-20
 * minutes, like both replicas at the start, and the leak check's window (the last 40 minutes) should open after
 * every process's warm-up, not in the middle of one.
 */
export const faults: Fault[] = [
  { name: "replica kill -9 and restart (batch running)", kind: "replica", seconds: 10, begin: (t) => t.killReplica(0), finish: (t) => t.restartReplica(0) },
  { name: "llama-server kill -9 and restart", kind: "upstream", seconds: 20, begin: (t) => t.killLlamaServer(1), finish: (t) => t.restartLlamaServer(1) },
  { name: "upstream stalls mid-stream", kind: "upstream", seconds: 30, begin: (t) => t.faulty.setMode("stall"), finish: (t) => t.faulty.setMode("ok") },
  { name: "upstream resets mid-stream", kind: "upstream", seconds: 30, begin: (t) => t.faulty.setMode("reset"), finish: (t) => t.faulty.setMode("ok") },
  { name: "Redis stopped", kind: "redis", seconds: 30, begin: (t) => t.redis.cut("refuse"), finish: (t) => t.redis.restore() },
  { name: "upstream answers 500", kind: "upstream", seconds: 30, begin: (t) => t.faulty.setMode("error"), finish: (t) => t.faulty.setMode("ok") },
  { name: "PostgreSQL connections cut", kind: "database", seconds: 20, begin: (t) => t.postgres.proxy.cut("refuse"), finish: (t) => t.postgres.proxy.restore() },
  { name: "upstream answers slowly", kind: "upstream", seconds: 30, begin: (t) => t.faulty.setMode("slow"), finish: (t) => t.faulty.setMode("ok") },
  // The flood plan's rate limit doubles: its client sees the new limit in x-ratelimit-limit-requests.
  { name: "SIGHUP with a changed plan", kind: "reload", seconds: 0, begin: (t) => t.reload(plans(240)), finish: () => {} },
];

/** When each fault starts, seconds from the start: spread over [10%, 85%] of the run (the batch is submitted 30 s before the replica is killed). */
export function schedule(totalSeconds: number): { at: number; fault: Fault }[] {
  const span = 0.75 * totalSeconds;
  return faults.map((fault, i) => ({ at: 0.1 * totalSeconds + (i * span) / faults.length, fault }));
}

/** Runs the schedule from `startedAt`; each fault's window is appended to `logFile` as it ends, and returned. */
export async function runFaults(topology: Topology, startedAt: number, totalSeconds: number, logFile: string): Promise<FaultWindow[]> {
  const windows: FaultWindow[] = [];
  for (const { at, fault } of schedule(totalSeconds)) {
    await new Promise((r) => setTimeout(r, Math.max(0, startedAt + at * 1000 - Date.now())));
    const start = Date.now();
    process.stderr.write(`${new Date(start).toISOString()} fault: ${fault.name}\n`);
    await fault.begin(topology);
    await new Promise((r) => setTimeout(r, fault.seconds * 1000));
    await fault.finish(topology);
    const window: FaultWindow = { name: fault.name, kind: fault.kind, start, end: Date.now() };
    appendFileSync(logFile, JSON.stringify({ ...window, startIso: new Date(start).toISOString(), endIso: new Date(window.end).toISOString() }) + "\n");
    windows.push(window);
  }
  return windows;
}
