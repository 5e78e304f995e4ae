import { spawn } from "node:child_process";
import path from "node:path";
import { createInterface } from "node:readline";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { modelsDir, spawnServer, tempDir } from "../harness/server.ts";
import { ratioRow, type BenchRow } from "./bench-row.ts";
import { runNode } from "./processes.ts";

/**
 * Issue 23: llama embeddings, 64 sentences per request (base64), on `modelgate serve` read by
 * bench/clients/embed-client.mjs, against the raw engine (bench/peers/raw-llama-embed.ts: node-llama-cpp's
 * embedding context, one input after another as the engine runs them), each in its own process, alternating;
 * RUNS rounds of ROUNDS requests.
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const ROUNDS = 10;
const root = path.resolve(import.meta.dirname, "..");
const model = path.join(modelsDir, "forged/bert-embed-tiny.gguf");

export default async function embeddingsBench(): Promise<BenchRow[]> {
  const dir = tempDir("bench-embeddings-");
  const raw = {
    dataDir: dir,
    plans: { bench: { rateLimit: { requests: 10_000_000, window: "1m" } } },
    defaultPlan: "bench",
    models: [{ id: "embed", engine: "llama", source: model, capabilities: ["embeddings"], threads: 1 }],
  };
  const gateway = await spawnServer(raw, dir);
  const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
  const engine = spawn(process.execPath, ["--import", "tsx", path.join(root, "bench/peers/raw-llama-embed.ts"), model, "1"], { stdio: ["pipe", "pipe", "inherit"] });
  const lines = createInterface({ input: engine.stdout! })[Symbol.asyncIterator]();
  await lines.next();
  const sides = {
    raw: async () => {
      engine.stdin!.write(`${ROUNDS}\n`);
      return (JSON.parse((await lines.next()).value as string) as { inputsPerSecond: number }).inputsPerSecond;
    },
    modelgate: async () =>
      (JSON.parse(await runNode([path.join(root, "bench/clients/embed-client.mjs"), `${gateway.origin}/v1/embeddings`, "embed", String(ROUNDS), key, path.join(dir, "tls/cert.pem")])) as { inputsPerSecond: number }).inputsPerSecond,
  };
  const rates = { raw: [] as number[], modelgate: [] as number[] };
  try {
    await sides.raw();
    await sides.modelgate();
    for (let i = 0; i < RUNS; i++) {
      process.stderr.write(`  run ${i + 1}/${RUNS}\n`);
      for (const side of i % 2 === 0 ? (["raw", "modelgate"] as const) : (["modelgate", "raw"] as const)) rates[side].push(await sides[side]());
    }
  } finally {
    engine.kill();
    await gateway.stop();
  }
  return [
    ratioRow({ item: "llama embeddings, 64 inputs per request: Modelgate vs raw node-llama-cpp (out of process)", service: rates.modelgate, raw: rates.raw, unit: "inputs/s", target: ">= 0.9" }),
  ];
}
