import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { createInterface } from "node:readline";
import { startListening, type Peer } from "../harness/peers.ts";
import { compiledCliPath, sourceCliPath } from "../harness/server.ts";

/**
 * The out-of-process pieces of the gateway benchmarks: peer servers (bench/peers/*.mjs, each printing
 * `listening PORT`; the canned upstream, which tests start too, is harness/peers.ts's), node scripts run to
 * completion (the clients in bench/clients/), and autocannon.
 */
const root = path.resolve(import.meta.dirname, "..");

/**
 * The CLI a bench serves Modelgate with: the compiled build, as deployed (`npm start`, the Dockerfile's entry point),
 * made from the tree first; BENCH_TSX=1 runs the sources through tsx instead, whose transform names every closure it
 * makes (a `defineProperty` each, on every call of a function that makes one), which the build does not.
 */
export function gatewayEntry(): string {
  return process.env.BENCH_TSX ? sourceCliPath : compiledCliPath();
}

/** A rate limit no bench load reaches: the gateway benches measure the path, not the limiter's refusals. */
export const benchRateLimit = { requests: 100_000_000, window: "1m" };

/** The canned upstream (harness/peers.ts) on `port` as the model `canned`: the gateway benches' `engine: upstream` entry. */
export function cannedModel(port: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { id: "canned", engine: "upstream", capabilities: ["chat"], upstreams: [{ url: `http://127.0.0.1:${port}/v1`, model: "canned", maxInFlight: 256 }], ...extra };
}

/** Runs a node script to completion and resolves with its stdout (rejects on a non-zero exit). */
export function runNode(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
    child.once("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`${args.join(" ")} exited ${code}: ${err}`))));
  });
}

/** A process that answers each line written to its stdin with one line on its stdout (a warmed client or raw engine). */
export interface LineProcess {
  pid: number | undefined;
  /** The next line the process prints (a ready line, say). */
  read(): Promise<string>;
  /** Writes `line` and resolves with the next line the process prints. */
  ask(line: string): Promise<string>;
  stop(): void;
}

/**
 * Starts `node ARGS` as a LineProcess. The process stays up between runs, so a bench warms it with the side it
 * measures: a client started for each run would be measured cold (its TLS handshake, and undici not yet optimised,
 * on the same cores as the server), which the in-process raw engine it is compared with never is.
 */
export function startLineProcess(args: string[]): LineProcess {
  const child = spawn(process.execPath, args, { stdio: ["pipe", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const exited = new Promise<never>((_, reject) => child.once("exit", (code) => reject(new Error(`${args.join(" ")} exited ${code}`))));
  exited.catch(() => {});
  const read = async () => {
    const next = await Promise.race([lines.next(), exited]);
    if (next.done) throw new Error(`${args.join(" ")} closed its output`);
    return next.value as string;
  };
  return {
    pid: child.pid,
    read,
    ask(line) {
      child.stdin!.write(`${line}\n`);
      return read();
    },
    stop: () => child.kill(),
  };
}

/**
 * node-llama-cpp's LlamaChat alone in its own process (bench/peers/raw-llama-chat.ts: the llama engine's model,
 * context, 1 thread, wrapper and sampling), loaded once; each `run` asks it for `requests` completions one after
 * another and reads back its tokens per second and tokens. The raw side of the streaming and batching benches.
 */
export async function startRawLlamaChat(file: string, context: number) {
  const engine = startLineProcess(["--import", "tsx", path.join(root, "bench/peers/raw-llama-chat.ts"), file, "1", String(context)]);
  await engine.read();
  return {
    pid: engine.pid,
    run: async (requests: number, tokens: number, seed: number) => JSON.parse(await engine.ask(`${requests} ${tokens} ${seed}`)) as { tokensPerSecond: number; tokens: number },
    stop: engine.stop,
  };
}

/** Starts bench/peers/<script> (with `nodeArgs` for node itself) and resolves once it prints the port it listens on. */
export function startPeer(script: string, args: string[] = [], nodeArgs: string[] = []): Promise<Peer> {
  return startListening(path.join(root, "bench/peers", script), args, nodeArgs);
}

/** `perf record -e cpu-clock` (the one event a VM without PMU access has) at `hz` on a running process until `work` settles. */
export async function perfRecorded<T>(pid: number, file: string, hz: number, work: () => Promise<T>): Promise<T> {
  const perf = spawn("perf", ["record", "-e", "cpu-clock", "-F", String(hz), "-g", "-p", String(pid), "-o", file], { stdio: "ignore" });
  await new Promise((r) => setTimeout(r, 500));
  try {
    return await work();
  } finally {
    const exited = new Promise((r) => perf.once("exit", r));
    perf.kill("SIGINT");
    await exited;
  }
}

export interface Load {
  rps: number;
  p50: number;
  p99: number;
  /** Non-2xx answers and connection errors. */
  failed: number;
}

/** autocannon in its own process: `connections` keep-alive connections POSTing `body` (or GETting, without one) for `seconds`. */
export async function autocannon(options: { url: string; body?: string; key?: string; connections?: number; seconds: number; rate?: number }): Promise<Load> {
  const auth = options.key ? ["-H", `authorization=Bearer ${options.key}`] : [];
  const request = options.body === undefined ? ["-m", "GET"] : ["-m", "POST", "-H", "content-type=application/json", "-b", options.body];
  // `rate`: at most this many requests a second in all (autocannon's --overallRate), instead of as fast as answered.
  const rate = options.rate === undefined ? [] : ["--overallRate", String(options.rate)];
  const args = ["-c", String(options.connections ?? 16), "-d", String(options.seconds), ...rate, ...request, ...auth, "-j", options.url];
  const out = await runNode([path.join(root, "node_modules/autocannon/autocannon.js"), ...args]);
  const r = JSON.parse(out) as { requests: { average: number }; latency: { p50: number; p99: number }; non2xx: number; errors: number };
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, failed: r.non2xx + r.errors };
}

/**
 * An autocannon load on the server of process `pid`, refusing a run with any failed request (`label` names it in the
 * error): its req/s and the CPU the process spent per request (/proc, every thread), in µs.
 */
export async function loadWithCpu(pid: number | undefined, options: Parameters<typeof autocannon>[0], label: string): Promise<{ rps: number; cpuUs: number }> {
  const before = cpuMs(pid);
  const load = await autocannon(options);
  if (load.failed > 0) throw new Error(`${label}: ${load.failed} failed requests`);
  return { rps: load.rps, cpuUs: ((cpuMs(pid) - before) * 1000) / (load.rps * options.seconds) };
}

/** autocannon's throughput, refusing a run with any failed request. */
export async function throughput(options: Parameters<typeof autocannon>[0]): Promise<number> {
  const load = await autocannon(options);
  if (load.failed > 0) throw new Error(`${options.url}: ${load.failed} failed requests`);
  return load.rps;
}

/** CPU milliseconds a process has used (user + system, every thread), or NaN where /proc is missing (Linux only). */
export function cpuMs(pid: number | undefined): number {
  const stat = `/proc/${pid}/stat`;
  if (pid === undefined || !existsSync(stat)) return Number.NaN;
  const fields = readFileSync(stat, "utf8").split(") ")[1]!.split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // clock ticks (USER_HZ 100)
}

/** CPU milliseconds of a process and every process it started (their children too), or NaN as `cpuMs`. */
export function treeCpuMs(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  const children = (id: number): number[] => {
    const tasks = `/proc/${id}/task`;
    if (!existsSync(tasks)) return [];
    return readdirSync(tasks).flatMap((tid) => {
      const file = `${tasks}/${tid}/children`;
      return existsSync(file) ? readFileSync(file, "utf8").split(" ").filter(Boolean).map(Number) : [];
    });
  };
  let total = 0;
  for (let queue = [pid]; queue.length > 0; ) {
    const id = queue.pop()!;
    total += cpuMs(id);
    queue = queue.concat(children(id));
  }
  return total;
}
