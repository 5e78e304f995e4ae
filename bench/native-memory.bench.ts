import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { modelsDir, spawnServer, tempDir } from "../harness/server.ts";
import { ratioRow, type BenchRow } from "./bench-row.ts";
import { throughput } from "./processes.ts";

/**
 * Issue 47: what trimming glibc's heaps after each major GC costs (`server.trimNativeMemory`, on by default). Two
 * servers, each its own process at the default log level, with `stories` (llama, 4 slots) and the ONNX encoder
 * `forged/bert-embed-tiny`: one as shipped, one with the trim off. autocannon (its own process) runs SECONDS at 4
 * connections against each, the sides alternating; chat of 32 tokens, then embeddings of 16 inputs. Medians of RUNS,
 * min–max of the ratio. (The allocator setting measured the same way cost 0.88x and 0.45x: decision 0045.)
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);

export default async function nativeMemoryBench(): Promise<BenchRow[]> {
  const server = async (trimNativeMemory: boolean) => {
    const dir = tempDir("bench-native-memory-");
    const raw = {
      dataDir: dir,
      server: { trimNativeMemory },
      plans: { bench: { rateLimit: { requests: 10_000_000, window: "1m" } } },
      defaultPlan: "bench",
      models: [
        { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, threads: 1, parallel: 4 },
        { id: "embed", engine: "onnx", source: path.join(modelsDir, "forged/bert-embed-tiny"), capabilities: ["embeddings"], threads: 1 },
      ],
    };
    const spawned = await spawnServer(raw, dir);
    const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
    return { spawned, key, origin: spawned.origin };
  };
  const trimmed = await server(true);
  const untrimmed = await server(false);
  const loads = {
    chat: { path: "/v1/chat/completions", body: JSON.stringify({ model: "stories", max_tokens: 32, messages: [{ role: "user", content: "Once upon a time" }] }) },
    embeddings: { path: "/v1/embeddings", body: JSON.stringify({ model: "embed", input: Array.from({ length: 16 }, (_, i) => `sentence number ${i} about a cat and a dog`) }) },
  };
  const rps = { chat: { on: [] as number[], off: [] as number[] }, embeddings: { on: [] as number[], off: [] as number[] } };
  try {
    // One short warm-up each, so that neither side pays its first requests' one-time costs inside a run.
    for (const s of [trimmed, untrimmed]) for (const load of Object.values(loads)) await throughput({ url: `${s.origin}${load.path}`, key: s.key, body: load.body, connections: 4, seconds: 2 });
    for (let i = 0; i < RUNS; i++) {
      process.stderr.write(`  run ${i + 1}/${RUNS}\n`);
      for (const [name, load] of Object.entries(loads) as [keyof typeof loads, (typeof loads)["chat"]][]) {
        for (const side of i % 2 === 0 ? (["on", "off"] as const) : (["off", "on"] as const)) {
          const s = side === "on" ? trimmed : untrimmed;
          rps[name][side].push(await throughput({ url: `${s.origin}${load.path}`, key: s.key, body: load.body, connections: 4, seconds: SECONDS }));
        }
      }
    }
  } finally {
    await Promise.all([trimmed.spawned.stop(), untrimmed.spawned.stop()]);
  }
  return [
    ratioRow({ item: "native memory trim: chat req/s (stories, 32 tokens, c=4) with the trim after GC vs without", service: rps.chat.on, raw: rps.chat.off, unit: "req/s", target: ">= 0.95" }),
    ratioRow({ item: "native memory trim: embeddings req/s (ONNX encoder, 16 inputs, c=4) with the trim vs without", service: rps.embeddings.on, raw: rps.embeddings.off, unit: "req/s", target: ">= 0.95" }),
  ];
}
