import path from "node:path";
import { createKey } from "../test/helpers/keys.ts";
import { testConfig } from "../test/helpers/config.ts";
import { llamaServerBinary, startLlamaServer } from "../test/helpers/llama-server.ts";
import { spawnServer, tempDir } from "../test/helpers/server.ts";
import { shapedModel } from "../test/helpers/shaped-model.ts";
import { spread, type BenchRow } from "./bench-row.ts";
import { runNode } from "./processes.ts";

/**
 * Issue 24: concurrent streams on the SmolLM2-135M shape, 1 thread everywhere. Three sides, each its own process,
 * read by bench/clients/stream-client.mjs (its own process): `modelgate serve` with the in-process `llama` engine,
 * `modelgate serve` with `engine: llama-server` (a managed llama-server), and llama-server straight. Each runs one
 * stream, then 4 concurrent streams (aggregate tok/s); the order rotates each round; RUNS rounds.
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const TOKENS = 96;
const CONTEXT = 512;
const root = path.resolve(import.meta.dirname, "..");

export default async function batchingBench(): Promise<BenchRow[]> {
  const model = shapedModel();
  const dir = tempDir("bench-batching-");
  const raw = {
    dataDir: dir,
    plans: { bench: { rateLimit: { requests: 10_000_000, window: "1m" } } },
    defaultPlan: "bench",
    models: [
      { id: "inproc", engine: "llama", source: model, capabilities: ["chat"], contextSize: CONTEXT, parallel: 4, threads: 1 },
      { id: "managed", engine: "llama-server", binary: llamaServerBinary(), source: model, capabilities: ["chat"], contextSize: CONTEXT, parallel: 4, threads: 1 },
    ],
  };
  const gateway = await spawnServer(raw, dir);
  const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
  const ca = path.join(dir, "tls/cert.pem");
  const direct = await startLlamaServer(model, ["-c", String(CONTEXT * 4), "-np", "4", "-t", "1", "-tb", "1"]);
  const client = async (url: string, id: string, concurrency: number, auth: string[]) =>
    (JSON.parse(await runNode([path.join(root, "bench/clients/stream-client.mjs"), url, id, String(TOKENS), "1", ...auth, String(concurrency)])) as { tokensPerSecond: number }).tokensPerSecond;
  const sides = {
    "in-process": (c: number) => client(`${gateway.origin}/v1/chat/completions`, "inproc", c, [key, ca]),
    managed: (c: number) => client(`${gateway.origin}/v1/chat/completions`, "managed", c, [key, ca]),
    "llama-server": (c: number) => client(`${direct.origin}/v1/chat/completions`, "direct", c, ["", ""]),
  };
  type Side = keyof typeof sides;
  const names = Object.keys(sides) as Side[];
  const rates = { 1: {} as Record<Side, number[]>, 4: {} as Record<Side, number[]> };
  for (const n of names) rates[1][n] = [], rates[4][n] = [];
  try {
    for (const n of names) await sides[n](4); // warm-up
    for (let i = 0; i < RUNS; i++) {
      process.stderr.write(`  run ${i + 1}/${RUNS}\n`);
      for (let k = 0; k < names.length; k++) {
        const n = names[(i + k) % names.length]!;
        rates[1][n].push(await sides[n](1));
        rates[4][n].push(await sides[n](4));
      }
    }
  } finally {
    await gateway.stop();
    await direct.stop();
  }
  const med = (c: 1 | 4, n: Side) => spread(rates[c][n]).median;
  const ratioRow = (item: string, a: number[], b: number[], target: string): BenchRow => {
    const r = spread(a.map((v, i) => v / b[i]!));
    return { item, service: spread(a).median, raw: spread(b).median, unit: "tok/s", ratio: r.median, range: [r.min, r.max], target };
  };
  return [
    ratioRow("batching: in-process llama, 4 streams vs 1 (smollm2-135m shape)", rates[4]["in-process"], rates[1]["in-process"], ">= 1.3"),
    ratioRow("batching: in-process llama vs llama-server, 4 streams aggregate", rates[4]["in-process"], rates[4]["llama-server"], ">= 0.9"),
    ratioRow("batching: llama-server straight, 4 streams vs 1 (reference)", rates[4]["llama-server"], rates[1]["llama-server"], "reference"),
    ratioRow("managed llama-server engine vs llama-server straight, 1 stream", rates[1].managed, rates[1]["llama-server"], ">= 0.97"),
    ratioRow("managed llama-server engine vs llama-server straight, 4 streams", rates[4].managed, rates[4]["llama-server"], ">= 0.97"),
    { item: "(medians) in-process 1 stream", service: med(1, "in-process"), raw: med(1, "llama-server"), unit: "tok/s", ratio: med(1, "in-process") / med(1, "llama-server"), target: "reference" },
  ];
}
