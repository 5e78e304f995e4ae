// The raw engine llama embeddings are compared with: node-llama-cpp's embedding context in its own process, same
// model and threads. Loads once, then for each stdin line `N` embeds the bench's 64 sentences N times, one after
// another, and prints {inputsPerSecond}. `node --import tsx raw-llama-embed.ts MODEL THREADS`
import { createInterface } from "node:readline";
import { getLlamaRuntime } from "../../src/engines/llama/llama-runtime.ts";
import { benchSentences } from "../clients/sentences.mjs";

const [modelPath, threads] = process.argv.slice(2);
const llama = await getLlamaRuntime();
const model = await llama.loadModel({ modelPath: modelPath! });
const context = await model.createEmbeddingContext({ threads: Number(threads) });
console.log("listening 0");

for await (const line of createInterface({ input: process.stdin })) {
  const rounds = Number(line);
  const started = performance.now();
  for (let r = 0; r < rounds; r++) for (const sentence of benchSentences) await context.getEmbeddingFor(sentence);
  console.log(JSON.stringify({ inputsPerSecond: (rounds * benchSentences.length) / ((performance.now() - started) / 1000) }));
}
