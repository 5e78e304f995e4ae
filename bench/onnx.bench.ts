import path from "node:path";
import { AutoModelForSequenceClassification, AutoTokenizer, pipeline, type Tensor } from "@huggingface/transformers";
import { startServer, modelsDir } from "../harness/server.ts";
import { median, ratioRow, type BenchRow } from "./bench-row.ts";

const RUNS = 21;
const BATCH = 64;
const DOCS = 100;
const THREADS = 1;
const embedPath = path.join(modelsDir, "forged/bert-embed-tiny");
const rerankPath = path.join(modelsDir, "forged/cross-encoder-tiny");

const subjects = ["The cat", "A dog", "My neighbour", "The old train", "Paris", "A small river", "The museum", "France", "The market", "A child"];
const predicates = [
  "sat on the mat in the warm afternoon sun",
  "plays with a ball in the park near the lake",
  "is the capital of a large country in Europe",
  "flows slowly through the quiet city at night",
  "has many visitors from every part of the world",
  "fell sharply as the bank raised its rates again",
];
const sentence = (i: number) => `${subjects[i % subjects.length]} ${predicates[(i * 7) % predicates.length]} (${i}).`;
const texts = Array.from({ length: BATCH }, (_, i) => sentence(i));
const query = "What is the capital of France?";
const documents = Array.from({ length: DOCS }, (_, i) => sentence(i + 3));

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const started = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - started) / 1e9;
}

/** Runs two calls alternately (after a warm-up of each), so both see the same machine load; medians in seconds. */
async function alternate(a: () => Promise<unknown>, b: () => Promise<unknown>): Promise<[number, number]> {
  await a();
  await b();
  const ta: number[] = [];
  const tb: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    ta.push(await timed(a));
    tb.push(await timed(b));
  }
  return [median(ta), median(tb)];
}

/**
 * ONNX encoders: embeddings/s at batch 64 and rerank pairs/s at 100 documents, through HTTPS (tokenize on the
 * main thread, forward pass in a worker) vs the plain transformers.js calls in-process, same threads. The two
 * sides run alternately because this machine is shared and its load drifts.
 */
export default async function onnxBench(): Promise<BenchRow[]> {
  const sessionOptions = { intraOpNumThreads: THREADS, interOpNumThreads: 1 };
  const extractor = await pipeline("feature-extraction", embedPath, { dtype: "fp32", local_files_only: true, session_options: sessionOptions });
  const tokenizer = await AutoTokenizer.from_pretrained(rerankPath, { local_files_only: true });
  const cross = await AutoModelForSequenceClassification.from_pretrained(rerankPath, { dtype: "fp32", local_files_only: true, session_options: sessionOptions });
  const rawEmbed = () => extractor(texts, { pooling: "mean", normalize: true });
  const rawRerank = async () => {
    const inputs = tokenizer(new Array<string>(DOCS).fill(query), { text_pair: documents, padding: true, truncation: true });
    const { logits } = (await cross(inputs)) as { logits: Tensor };
    return Array.from(logits.data as Float32Array, (x) => 1 / (1 + Math.exp(-x)));
  };

  const srv = await startServer({
    logLevel: "error",
    models: [
      { id: "embed-onnx", engine: "onnx", source: embedPath, capabilities: ["embeddings"], threads: THREADS },
      { id: "rerank-onnx", engine: "onnx", source: rerankPath, capabilities: ["rerank"], threads: THREADS },
    ],
  });
  let embed: [number, number];
  let rerank: [number, number];
  try {
    const { key } = await srv.createKey();
    const post = async (route: string, body: unknown, check: (json: Record<string, unknown[]>) => boolean) => {
      const res = await srv.fetch(`${srv.baseURL}/${route}`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      const json = (await res.json()) as Record<string, unknown[]>;
      if (res.status !== 200 || !check(json)) throw new Error(`${route} failed: ${res.status} ${JSON.stringify(json).slice(0, 300)}`);
    };
    embed = await alternate(() => post("embeddings", { model: "embed-onnx", input: texts, encoding_format: "base64" }, (j) => j.data?.length === BATCH), rawEmbed);
    rerank = await alternate(() => post("rerank", { model: "rerank-onnx", query, documents }, (j) => j.results?.length === DOCS), rawRerank);
  } finally {
    await srv.close();
    await extractor.dispose();
    await cross.dispose();
  }

  const row = (item: string, unit: string, n: number, [service, raw]: [number, number]): BenchRow => ratioRow({ item, service: n / service, raw: n / raw, unit, target: ">= 0.9" });
  return [
    row("embeddings ONNX, batch 64, base64 (HTTPS vs pipeline)", "inputs/s", BATCH, embed),
    row("rerank ONNX, 100 docs (HTTPS vs tokenizer+model)", "pairs/s", DOCS, rerank),
  ];
}
