import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { spawnServer, tempDir } from "../harness/server.ts";
import { shapedModel } from "../harness/shaped-model.ts";
import { ratioRow, spread, type BenchRow } from "./bench-row.ts";
import { runNode } from "./processes.ts";

/**
 * Issue 24: KV prefix reuse across turns. On the SmolLM2-135M shape at parallel 2, a conversation with a history
 * of about 1,000 tokens streams its first turn, then parallel + 1 = 3 other requests run, then its second turn;
 * bench/clients/turns-client.mjs (its own process) times each turn's first token. RUNS conversations, each new.
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const PARALLEL = 2;
const WORDS = 230;

export default async function prefixBench(): Promise<BenchRow[]> {
  const dir = tempDir("bench-prefix-");
  const raw = {
    dataDir: dir,
    plans: { bench: { rateLimit: { requests: 10_000_000, window: "1m" } } },
    defaultPlan: "bench",
    models: [{ id: "shaped", engine: "llama", source: shapedModel(), capabilities: ["chat"], contextSize: 2048, parallel: PARALLEL, threads: 1 }],
  };
  const server = await spawnServer(raw, dir);
  const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
  const runs: { ttft1: number; ttft2: number; promptTokens1: number; promptTokens2: number }[] = [];
  try {
    for (let i = 0; i < RUNS; i++) {
      process.stderr.write(`  run ${i + 1}/${RUNS}\n`);
      const out = await runNode([path.join(import.meta.dirname, "clients/turns-client.mjs"), `${server.origin}/v1/chat/completions`, "shaped", String(WORDS), String(PARALLEL + 1), String(i), key, path.join(dir, "tls/cert.pem")]);
      runs.push(JSON.parse(out));
    }
  } finally {
    await server.stop();
  }
  const tokens = spread(runs.map((r) => r.promptTokens1));
  return [
    ratioRow({
      item: `prefix reuse: 2nd-turn TTFT vs 1st (smollm2-135m shape, ${tokens.median}-token history, ${PARALLEL + 1} requests between, parallel ${PARALLEL})`,
      service: runs.map((r) => r.ttft2),
      raw: runs.map((r) => r.ttft1),
      unit: "ms",
      target: "<= 0.3",
    }),
  ];
}
