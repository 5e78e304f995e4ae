import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { llamaServerBinary, startLlamaServer } from "../harness/llama-server.ts";
import { spawnServer, tempDir } from "../harness/server.ts";
import { shapedModel } from "../harness/shaped-model.ts";
import { ratioRow, type BenchRow } from "./bench-row.ts";
import { cpuMs, runNode } from "./processes.ts";

/**
 * Issues 24 and 35: concurrent streams on the SmolLM2-135M shape, 1 thread everywhere. The sides, each its own
 * process, read by bench/clients/stream-client.mjs (its own process): `modelgate serve` with the in-process `llama`
 * engine (parallel 4, and parallel 8 for 8 streams; `llama.server: never`), a second `modelgate serve` whose
 * `engine: llama` entry (parallel 4) runs on the managed llama-server (`llama.server: auto` with a built binary, as
 * after `modelgate engines build llama-server`), and llama-server straight (-np 4, and -np 8 for 8 streams). Each round runs every side's single
 * stream and concurrent streams (aggregate tok/s), the order of the sides rotating each round; RUNS rounds.
 * On Linux it also reads the CPU time the serving process spent per token (the gateway process for in-process;
 * llama-server's own): steadier than wall time on a shared machine, and what capacity is made of. The shaped model
 * never stops early, so a run's tokens are TOKENS x streams. bench/probe-llama-batching.ts explains the in-process
 * figures (tokens and passes per llama_decode, the kernel's cost per decode size).
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const TOKENS = 96;
const CONTEXT = 512;
const root = path.resolve(import.meta.dirname, "..");

export default async function batchingBench(): Promise<BenchRow[]> {
  const model = shapedModel();
  const dir = tempDir("bench-batching-");
  const plans = { bench: { rateLimit: { requests: 10_000_000, window: "1m" } } };
  const raw = {
    dataDir: dir,
    plans,
    defaultPlan: "bench",
    llama: { server: "never" },
    models: [
      { id: "inproc", engine: "llama", source: model, capabilities: ["chat"], contextSize: CONTEXT, parallel: 4, threads: 1 },
      { id: "inproc8", engine: "llama", source: model, capabilities: ["chat"], contextSize: CONTEXT, parallel: 8, threads: 1 },
    ],
  };
  // The same engine: llama entry, placed on the managed llama-server by llama.server: auto (same data dir and key).
  const placed = {
    ...raw,
    llama: { server: "auto", serverBinary: llamaServerBinary() },
    models: [{ id: "managed", engine: "llama", source: model, capabilities: ["chat"], contextSize: CONTEXT, parallel: 4, threads: 1 }],
  };
  const gateway = await spawnServer(raw, dir);
  const onServer = await spawnServer(placed, dir);
  const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
  const ca = path.join(dir, "tls/cert.pem");
  const direct = await startLlamaServer(model, ["-c", String(CONTEXT * 4), "-np", "4", "-t", "1", "-tb", "1"]);
  const direct8 = await startLlamaServer(model, ["-c", String(CONTEXT * 8), "-np", "8", "-t", "1", "-tb", "1"]);
  const client = async (url: string, id: string, concurrency: number, auth: string[]) =>
    (JSON.parse(await runNode([path.join(root, "bench/clients/stream-client.mjs"), url, id, String(TOKENS), "1", ...auth, String(concurrency)])) as { tokensPerSecond: number }).tokensPerSecond;
  const viaGateway = (id: string, origin = gateway.origin) => (c: number) => client(`${origin}/v1/chat/completions`, id, c, [key, ca]);
  const straight = (origin: string) => (c: number) => client(`${origin}/v1/chat/completions`, "direct", c, ["", ""]);
  // Each side and the stream counts it runs in a round.
  // The process whose CPU a side's tokens cost (none for managed: the work is split between two processes).
  const sides = {
    "in-process": { run: viaGateway("inproc"), counts: [1, 4], pid: gateway.child.pid },
    managed: { run: viaGateway("managed", onServer.origin), counts: [1, 4], pid: undefined },
    "llama-server": { run: straight(direct.origin), counts: [1, 4], pid: direct.child.pid },
    "in-process p8": { run: viaGateway("inproc8"), counts: [8], pid: gateway.child.pid },
    "llama-server np8": { run: straight(direct8.origin), counts: [8], pid: direct8.child.pid },
  };
  type Side = keyof typeof sides;
  const names = Object.keys(sides) as Side[];
  const rates = new Map<string, number[]>();
  const cpus = new Map<string, number[]>();
  const rate = (side: Side, count: number) => rates.get(`${side} ${count}`)!;
  const cpu = (side: Side, count: number) => cpus.get(`${side} ${count}`)!;
  for (const n of names) for (const c of sides[n].counts) rates.set(`${n} ${c}`, []), cpus.set(`${n} ${c}`, []);
  try {
    for (const n of names) await sides[n].run(Math.max(...sides[n].counts)); // warm-up
    for (let i = 0; i < RUNS; i++) {
      process.stderr.write(`  run ${i + 1}/${RUNS}\n`);
      for (let k = 0; k < names.length; k++) {
        const n = names[(i + k) % names.length]!;
        for (const c of sides[n].counts) {
          const before = cpuMs(sides[n].pid);
          rate(n, c).push(await sides[n].run(c));
          cpu(n, c).push((cpuMs(sides[n].pid) - before) / (TOKENS * c));
        }
      }
    }
  } finally {
    await gateway.stop();
    await onServer.stop();
    await direct.stop();
    await direct8.stop();
  }
  const cpuRow = (item: string, aMs: number[], bMs: number[]): BenchRow => versus(item, aMs.map((v) => 1000 / v), bMs.map((v) => 1000 / v), "report", "tok/CPU s");
  const versus = (item: string, a: number[], b: number[], target: string, unit = "tok/s"): BenchRow => ratioRow({ item, service: a, raw: b, unit, target });
  return [
    versus("batching: in-process llama, 4 streams vs 1 (smollm2-135m shape)", rate("in-process", 4), rate("in-process", 1), ">= 1.6"),
    versus("batching: in-process llama vs llama-server, 4 streams aggregate", rate("in-process", 4), rate("llama-server", 4), ">= 0.9"),
    versus("batching: in-process llama vs llama-server, 1 stream", rate("in-process", 1), rate("llama-server", 1), "report (0.85 before)"),
    versus("batching: llama-server straight, 4 streams vs 1 (reference)", rate("llama-server", 4), rate("llama-server", 1), "reference"),
    versus("batching: in-process llama parallel 8, 8 streams vs 1 stream (parallel 4)", rate("in-process p8", 8), rate("in-process", 1), "report"),
    versus("batching: in-process llama vs llama-server, 8 streams aggregate (parallel 8, -np 8)", rate("in-process p8", 8), rate("llama-server np8", 8), "report"),
    versus("batching: llama-server straight, 8 streams (-np 8) vs 1 (reference)", rate("llama-server np8", 8), rate("llama-server", 1), "reference"),
    versus("engine: llama on the managed llama-server (llama.server auto) vs llama-server straight, 1 stream", rate("managed", 1), rate("llama-server", 1), ">= 0.97"),
    versus("engine: llama on the managed llama-server (llama.server auto) vs llama-server straight, 4 streams", rate("managed", 4), rate("llama-server", 4), ">= 0.97"),
    versus("engine: llama on the managed llama-server, 4 streams vs 1", rate("managed", 4), rate("managed", 1), "report"),
    versus("engine: llama, 4 streams aggregate: on the managed llama-server vs in-process", rate("managed", 4), rate("in-process", 4), "report"),
    versus("engine: llama, 1 stream: on the managed llama-server vs in-process", rate("managed", 1), rate("in-process", 1), "report"),
    ...(Number.isNaN(cpu("in-process", 1)[0]!)
      ? []
      : [
          // Tokens per CPU second (1000 / CPU ms per token), so that higher is better as in the rows above.
          cpuRow("CPU: in-process llama, tokens per CPU s, 4 streams vs 1", cpu("in-process", 4), cpu("in-process", 1)),
          cpuRow("CPU: in-process llama vs llama-server, tokens per CPU s, 4 streams", cpu("in-process", 4), cpu("llama-server", 4)),
          cpuRow("CPU: in-process llama vs llama-server, tokens per CPU s, 1 stream", cpu("in-process", 1), cpu("llama-server", 1)),
          cpuRow("CPU: llama-server straight, tokens per CPU s, 4 streams vs 1 (reference)", cpu("llama-server", 4), cpu("llama-server", 1)),
          cpuRow("CPU: in-process llama parallel 8, tokens per CPU s, 8 streams vs 1 stream", cpu("in-process p8", 8), cpu("in-process", 1)),
          cpuRow("CPU: in-process llama vs llama-server, tokens per CPU s, 8 streams (parallel 8, -np 8)", cpu("in-process p8", 8), cpu("llama-server np8", 8)),
        ]),
  ];
}
