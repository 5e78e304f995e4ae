import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { modelsDir, spawnServer, tempDir } from "../harness/server.ts";
import { ratioRow, type BenchRow } from "./bench-row.ts";
import { benchSentences } from "./clients/sentences.mjs";
import { cpuMs, gatewayEntry, startLineProcess } from "./processes.ts";
import { warmUp } from "./warm-up.ts";

/**
 * Issues 23 and 46.5: llama embeddings, 64 sentences per request (base64), on `modelgate serve` (the compiled
 * build, bench/processes.ts gatewayEntry) read by
 * bench/clients/embed-client.mjs (one process for the whole bench), against the raw engine
 * (bench/peers/raw-llama-embed.ts: node-llama-cpp's embedding context, one input after another as the engine runs
 * them), each in its own process. Both first run in turn until each has run WARM_SECONDS (their steady state), then
 * alternate; RUNS rounds of ROUNDS requests. On Linux it also reads each serving process's CPU time: inputs per CPU
 * second.
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const WARM_SECONDS = Number(process.env.BENCH_WARM_SECONDS ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10);
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
  const gateway = await spawnServer(raw, dir, [], {}, gatewayEntry());
  const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
  const engine = startLineProcess(["--import", "tsx", path.join(root, "bench/peers/raw-llama-embed.ts"), model, "1"]);
  await engine.read();
  // The client stays up across the runs, warmed with the gateway as the raw engine is (decision 0053).
  const client = startLineProcess([path.join(root, "bench/clients/embed-client.mjs"), `${gateway.origin}/v1/embeddings`, "embed", "stdin", key, path.join(dir, "tls/cert.pem")]);
  const rate = async (side: typeof engine) => (JSON.parse(await side.ask(String(ROUNDS))) as { inputsPerSecond: number }).inputsPerSecond;
  const sides = {
    raw: { pid: engine.pid, run: () => rate(engine) },
    modelgate: { pid: gateway.child.pid, run: () => rate(client) },
  };
  const rates = { raw: [] as number[], modelgate: [] as number[] };
  /** Inputs per CPU second of the serving process, run by run. */
  const perCpu = { raw: [] as number[], modelgate: [] as number[] };
  try {
    await warmUp([sides.raw.run, sides.modelgate.run], WARM_SECONDS);
    for (let i = 0; i < RUNS; i++) {
      process.stderr.write(`  run ${i + 1}/${RUNS}\n`);
      for (const side of i % 2 === 0 ? (["raw", "modelgate"] as const) : (["modelgate", "raw"] as const)) {
        const before = cpuMs(sides[side].pid);
        rates[side].push(await sides[side].run());
        perCpu[side].push((ROUNDS * benchSentences.length * 1000) / (cpuMs(sides[side].pid) - before));
      }
    }
  } finally {
    engine.stop();
    client.stop();
    await gateway.stop();
  }
  return [
    ratioRow({ item: "llama embeddings, 64 inputs per request: Modelgate vs raw node-llama-cpp (out of process)", service: rates.modelgate, raw: rates.raw, unit: "inputs/s", target: ">= 0.9" }),
    ...(Number.isNaN(perCpu.raw[0]!)
      ? []
      : [ratioRow({ item: "CPU: llama embeddings, 64 inputs per request: Modelgate (gateway process) vs raw node-llama-cpp (its process), inputs per CPU s", service: perCpu.modelgate, raw: perCpu.raw, unit: "inputs/CPU s", target: "report" })]),
  ];
}
