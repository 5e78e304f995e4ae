import path from "node:path";
import { getLlamaRuntime } from "../src/engines/llama/llama-runtime.ts";
import { startServer, modelsDir } from "../harness/server.ts";
import { median, ratioRow, type BenchRow } from "./bench-row.ts";

const RUNS = 5;
const DOCS = 100;
const THREADS = 1;
const modelPath = path.join(modelsDir, "forged/bert-rerank-tiny.gguf");

const query = "What is the capital of France?";
const subjects = ["Paris", "France", "The cat", "A river", "The capital", "Europe", "My dog", "The museum", "A train", "The city"];
const predicates = ["is the capital of France", "sat on the mat", "is a country in Europe", "flows through the city", "is very old", "has many visitors"];
const documents = Array.from({ length: DOCS }, (_, i) => `${subjects[i % subjects.length]} ${predicates[(i * 7) % predicates.length]} (${i}).`);

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const started = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - started) / 1e9;
}

/** Rerank pairs/s at 100 documents: POST /v1/rerank over HTTPS vs node-llama-cpp's rankAll in-process. */
export default async function rerankBench(): Promise<BenchRow[]> {
  // Raw first, then the service, each with its own model instance, never both at once.
  const llama = await getLlamaRuntime();
  const model = await llama.loadModel({ modelPath });
  const context = await model.createRankingContext({ contextSize: model.trainContextSize, batchSize: model.trainContextSize, threads: THREADS });
  const rawTimes: number[] = [];
  try {
    await context.rankAll(query, documents);
    for (let i = 0; i < RUNS; i++) rawTimes.push(await timed(() => context.rankAll(query, documents)));
  } finally {
    await context.dispose();
    await model.dispose();
  }

  const srv = await startServer({
    logLevel: "error",
    models: [{ id: "bert-rerank", engine: "llama", source: modelPath, capabilities: ["rerank"], threads: THREADS }],
  });
  const serviceTimes: number[] = [];
  try {
    const { key } = await srv.createKey();
    const call = async () => {
      const res = await srv.fetch(`${srv.baseURL}/rerank`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "bert-rerank", query, documents }),
      });
      const body = (await res.json()) as { results?: unknown[] };
      if (res.status !== 200 || body.results?.length !== DOCS) throw new Error(`rerank failed: ${res.status} ${JSON.stringify(body)}`);
    };
    await call();
    for (let i = 0; i < RUNS; i++) serviceTimes.push(await timed(call));
  } finally {
    await srv.close();
  }

  const service = DOCS / median(serviceTimes);
  const raw = DOCS / median(rawTimes);
  return [ratioRow({ item: "rerank GGUF, 100 docs (HTTPS vs rankAll)", service, raw, unit: "pairs/s", target: ">= 0.9" })];
}
