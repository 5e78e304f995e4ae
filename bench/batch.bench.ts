import { loadavg } from "node:os";
import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { modelsDir, spawnServer, tempDir } from "../harness/server.ts";
import { ratioRow, spread, type BenchRow } from "./bench-row.ts";
import { runNode } from "./processes.ts";

/**
 * Issue 36: a LINES-line chat batch on stories260K (POST /v1/files, /v1/batches, polled until completed) against the
 * same requests sent by a client at the model's `parallel` (bench/clients/batch-client.mjs, its own process), on the
 * same `modelgate serve`; the sides alternate, RUNS runs. Target: the batch at >= 0.9x the client's lines per second.
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const LINES = Number(process.env.BENCH_BATCH_LINES ?? 2000);
const MAX_TOKENS = 8;
const PARALLEL = 2;
const root = path.resolve(import.meta.dirname, "..");

export default async function batchBench(): Promise<BenchRow[]> {
  const dir = tempDir("bench-batch-");
  const raw = {
    dataDir: dir,
    logLevel: "warn",
    plans: { bench: { rateLimit: { requests: 10_000_000, window: "1m" } } },
    defaultPlan: "bench",
    batches: { pollInterval: "200ms" },
    models: [{ id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, threads: 1, parallel: PARALLEL }],
  };
  const gateway = await spawnServer(raw, dir);
  const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
  const side = async (mode: "client" | "batch") =>
    (JSON.parse(await runNode([path.join(root, "bench/clients/batch-client.mjs"), gateway.origin, "stories", String(LINES), String(MAX_TOKENS), String(PARALLEL), key, path.join(dir, "tls/cert.pem"), mode])) as { linesPerSecond: number }).linesPerSecond;
  const rates = { client: [] as number[], batch: [] as number[] };
  try {
    for (let i = 0; i < RUNS; i++) {
      for (const mode of i % 2 === 0 ? (["client", "batch"] as const) : (["batch", "client"] as const)) rates[mode].push(await side(mode));
      process.stderr.write(`  run ${i + 1}/${RUNS}: client ${rates.client.at(-1)!.toFixed(1)}, batch ${rates.batch.at(-1)!.toFixed(1)} lines/s (load ${loadavg()[0].toFixed(2)})\n`);
    }
  } finally {
    await gateway.stop();
  }
  const ratio = spread(rates.batch.map((v, i) => v / rates.client[i]!));
  const b = spread(rates.batch);
  const c = spread(rates.client);
  process.stderr.write(`  batch lines/s min/median/max ${b.min.toFixed(1)}/${b.median.toFixed(1)}/${b.max.toFixed(1)}; client ${c.min.toFixed(1)}/${c.median.toFixed(1)}/${c.max.toFixed(1)}; ratio ${ratio.min.toFixed(2)}/${ratio.median.toFixed(2)}/${ratio.max.toFixed(2)}\n`);
  return [
    ratioRow({ item: `Batch API: ${LINES}-line chat batch on stories260K vs the same requests from a client at parallel ${PARALLEL}`, service: rates.batch, raw: rates.client, unit: "lines/s", target: ">= 0.9" }),
  ];
}
