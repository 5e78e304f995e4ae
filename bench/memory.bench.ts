import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { modelsDir, spawnServer, tempDir, type SpawnedServer } from "../harness/server.ts";
import { shapedModel } from "../harness/shaped-model.ts";
import { ratioRow, type BenchRow } from "./bench-row.ts";
import { runNode } from "./processes.ts";
import { statusBytes } from "../harness/full-gc.ts";

/**
 * Issue 23: resident memory of `modelgate serve`, read from /proc/PID/status (VmRSS) once the process is idle:
 * with no model, with the SmolLM2-135M-shaped GGUF at parallel 1, and at parallel 8 (the difference / 7 is one
 * sequence's KV cache at contextSize 1024); then RSS before and after 1,000 streams cut by their clients
 * (bench/clients/abort-client.mjs, its own process) on stories260K.
 */
const root = path.resolve(import.meta.dirname, "..");
const ABORTS = Number(process.env.BENCH_ABORTS ?? 1000);

function rssMb(pid: number): number {
  return statusBytes(pid, ["VmRSS"]).VmRSS / 1048576;
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 1500));

async function serveWith(models: Record<string, unknown>[]): Promise<{ server: SpawnedServer; dir: string; raw: Record<string, unknown> }> {
  const dir = tempDir("bench-memory-");
  const raw = { dataDir: dir, plans: { bench: { rateLimit: { requests: 10_000_000, window: "1m" } } }, defaultPlan: "bench", models };
  return { server: await spawnServer(raw, dir), dir, raw };
}

async function idleRss(models: Record<string, unknown>[]): Promise<number> {
  const { server } = await serveWith(models);
  try {
    await settle();
    return rssMb(server.child.pid!);
  } finally {
    await server.stop();
  }
}

export default async function memoryBench(): Promise<BenchRow[]> {
  const shaped = shapedModel();
  const chat = (parallel: number) => ({ id: "shaped", engine: "llama", source: shaped, capabilities: ["chat"], contextSize: 1024, parallel, threads: 1 });
  const idle = await idleRss([]);
  const one = await idleRss([chat(1)]);
  const eight = await idleRss([chat(8)]);

  const stories = { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 512, parallel: 4, threads: 1 };
  const { server, dir, raw } = await serveWith([stories]);
  let before = 0;
  let after = 0;
  try {
    const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
    const run = (total: number) => runNode([path.join(root, "bench/clients/abort-client.mjs"), `${server.origin}/v1/chat/completions`, "stories", String(total), "4", key, path.join(dir, "tls/cert.pem")]);
    await run(100); // warm-up: JIT, caches, the allocator's first growth
    await settle();
    before = rssMb(server.child.pid!);
    await run(ABORTS);
    await settle();
    after = rssMb(server.child.pid!);
  } finally {
    await server.stop();
  }
  return [
    ratioRow({ item: "memory: RSS of modelgate serve, idle, no model", service: idle, raw: idle, ratios: [idle], unit: "MB", target: "report" }),
    ratioRow({ item: "memory: RSS added by the smollm2-135m shape loaded (parallel 1, ctx 1024)", service: one, raw: idle, ratios: [one - idle], unit: "MB", target: "report" }),
    ratioRow({ item: "memory: RSS per extra sequence (parallel 8 vs 1, ctx 1024)", service: eight, raw: one, ratios: [(eight - one) / 7], unit: "MB", target: "report" }),
    ratioRow({ item: `memory: RSS after ${ABORTS} aborted streams vs before (stories260K)`, service: after, raw: before, unit: "MB", target: "flat (<= 1.05)" }),
  ];
}
