// Issue 24's probe of node-llama-cpp's own batching, in this process (no server): on the SmolLM2-135M shape, the
// cost of prompt evaluation per token (64 tokens in one batch) and tokens/s of 1 and 4 sequences generating at
// once, for each context-option variant given as JSON (default: the defaults). It reports which binary it loaded
// (the prebuilt CPU build, or a local build from `npm run build:llama-native`).
//   node --import tsx bench/probe-llama-batching.ts '{"default":{},"fa-on":{"flashAttention":true},"threads2":{"threads":{"ideal":2,"min":2}}}'
import { getLlamaRuntime } from "../src/engines/llama/llama-runtime.ts";
import { shapedModel } from "../test/helpers/shaped-model.ts";
const llama = await getLlamaRuntime();
console.log("build", (llama as any).buildType, llama.gpu, "cpuMathCores", llama.cpuMathCores, "maxThreads", llama.maxThreads);
const model = await llama.loadModel({ modelPath: shapedModel() });
const variants: Record<string, object> = JSON.parse(process.argv[2] ?? '{"default":{}}');
for (const [name, opts] of Object.entries(variants)) {
  const context = await model.createContext({ sequences: 4, contextSize: 4096, threads: { ideal: 1, min: 1 }, ...opts });
  const seqs = Array.from({ length: 4 }, () => context.getSequence());
  const prompt = model.tokenize("Once upon a time there was a little girl who liked to play in the garden with her dog.".repeat(4));
  const gen = async (seq: any, n: number) => {
    await seq.clearHistory();
    let count = 0;
    for await (const _ of seq.evaluate(prompt.slice(0, 8), { temperature: 0 })) { if (++count >= n) break; }
    return count;
  };
  // prompt eval: 64 tokens in one sequence
  await seqs[0].clearHistory();
  let t = performance.now();
  await seqs[0].evaluateWithoutGeneratingNewTokens(prompt.slice(0, 64));
  const pp = (performance.now() - t) / 64;
  await gen(seqs[0], 8); // warm
  t = performance.now(); const one = await gen(seqs[0], 48); const oneRate = one / (performance.now() - t) * 1000;
  t = performance.now(); const counts = await Promise.all(seqs.map((s) => gen(s, 48))); const fourRate = counts.reduce((a, b) => a + b) / (performance.now() - t) * 1000;
  console.log(`${name}: prompt ${pp.toFixed(2)} ms/token, 1 stream ${oneRate.toFixed(1)} tok/s, 4 streams ${fourRate.toFixed(1)} tok/s (${(fourRate / oneRate).toFixed(2)}x)`);
  await context.dispose();
}
