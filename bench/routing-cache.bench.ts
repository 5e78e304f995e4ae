import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { modelsDir, spawnServer, tempDir } from "../harness/server.ts";
import { startCanned } from "../harness/peers.ts";
import { ratioRow, type BenchRow } from "./bench-row.ts";
import { benchRateLimit, cannedModel, cpuMs, runNode } from "./processes.ts";

/**
 * Issue 45.2, the response cache (`npm run bench -- routing` runs it with the routes' bench, routing-routes). Every
 * server and load generator is its own process, the sides alternate within each run, and each figure is the median
 * of RUNS runs (min–max in the table).
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const SECONDS = 5;
const client = path.join(import.meta.dirname, "clients", "cache-client.mjs");

export default function routingCacheBench(): Promise<BenchRow[]> {
  return responseCacheRows();
}

interface CacheRun {
  requests: number;
  all: number;
  failed: number;
  cache: { hit: number; miss: number; bypass: number };
  p50: number;
  p50Ttft: number;
}

/**
 * The response cache with the in-process store:
 * - CPU per request of `modelgate serve` (Linux /proc) answering hits (one deterministic request over and over)
 *   against misses (a new prompt each time, generated through `upstream` by the canned upstream and stored), 16
 *   connections of bench/clients/cache-client.mjs each;
 * - p50 time to the first content chunk of a streamed hit against a streamed miss on stories260K (llama in-process,
 *   32 tokens), one connection.
 */
async function responseCacheRows(): Promise<BenchRow[]> {
  const dir = tempDir("bench-routing-");
  const canned = await startCanned();
  const raw = {
    dataDir: dir,
    plans: { bench: { rateLimit: benchRateLimit, cache: {} } },
    defaultPlan: "bench",
    models: [
      cannedModel(canned.port, { cache: { ttl: "1h" } }),
      { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 512, parallel: 1, threads: 1, cache: { ttl: "1h" } },
    ],
  };
  const gateway = await spawnServer(raw, dir);
  const ca = path.join(dir, "tls/cert.pem");
  const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
  const url = `${gateway.origin}/v1/chat/completions`;
  let prefix = 0;
  const run = async (model: string, mode: "hit" | "miss", seconds: number, connections: number, stream: boolean): Promise<CacheRun> => {
    const out = JSON.parse(await runNode([client, url, model, mode, String(seconds), String(connections), stream ? "1" : "0", "32", key, ca, `p${++prefix}`])) as CacheRun;
    if (out.failed > 0) throw new Error(`${model} ${mode}: ${out.failed} failed requests`);
    if (out.cache[mode] !== out.requests) throw new Error(`${model} ${mode}: ${JSON.stringify(out.cache)} of ${out.requests} requests`);
    return out;
  };
  const cpu = { hit: [] as number[], miss: [] as number[] };
  const ttft = { hit: [] as number[], miss: [] as number[] };
  try {
    // V8 optimises the gateway's paths over the first seconds of load (bench/upstream.bench.ts): warmed, not measured.
    for (const mode of ["hit", "miss"] as const) await run("canned", mode, 10, 16, false);
    for (let i = 0; i < RUNS; i++) {
      process.stderr.write(`  run ${i + 1}/${RUNS}\n`);
      for (const mode of i % 2 === 0 ? (["hit", "miss"] as const) : (["miss", "hit"] as const)) {
        const before = cpuMs(gateway.child.pid);
        const load = await run("canned", mode, SECONDS, 16, false);
        cpu[mode].push(((cpuMs(gateway.child.pid) - before) * 1000) / load.all);
      }
      for (const mode of i % 2 === 0 ? (["miss", "hit"] as const) : (["hit", "miss"] as const)) ttft[mode].push((await run("stories", mode, 3, 1, true)).p50Ttft);
    }
  } finally {
    await gateway.stop();
    canned.child.kill();
  }
  return [
    ...(Number.isNaN(cpu.hit[0])
      ? []
      : [ratioRow({ item: "cache: CPU per request, a hit over a miss through upstream (canned, c=16)", service: cpu.hit, raw: cpu.miss, unit: "CPU µs/req", target: "<= 0.5" })]),
    ratioRow({ item: "cache: p50 TTFT, a streamed hit over a miss (stories260K, 32 tokens)", service: ttft.hit, raw: ttft.miss, unit: "ms", target: "(report)" }),
  ];
}
