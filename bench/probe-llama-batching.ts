// Issue 35's probe of in-process batching on the SmolLM2-135M shape, 1 thread, in this process (no server).
//  1. Kernel: CPU ms of one llama_decode carrying K tokens (one per sequence), K = 1, 2, 3, 4, 8 (min of rounds).
//  2. Engine: N concurrent chats through LlamaEngine.chat (the path a request takes), with the lockstep gate and
//     without it (node-llama-cpp's own dispatch, as before issue 35), alternating on one engine: tok/s, CPU ms per token, llama_decode calls, tokens per
//     generation decode and the passes llama.cpp splits each into (runs of consecutive sequence ids; the addon is
//     wrapped here to record them).
// CPU time is the process's (every thread), so it is steadier than wall time on a shared machine.
//   node --import tsx bench/probe-llama-batching.ts [STREAMS=1,4,8] [TOKENS=64] [ROUNDS=3]
import path from "node:path";
import { getLlamaRuntime } from "../src/engines/llama/llama-runtime.ts";
import { LlamaEngine } from "../src/engines/llama/llama-engine.ts";
import type { Lockstep } from "../src/engines/llama/lockstep.ts";
import type { LlamaContextSequence } from "node-llama-cpp";
import type { ChatRequest } from "../src/engines/engine.ts";
import { testConfig } from "../harness/config.ts";
import { shapedModel } from "../harness/shaped-model.ts";

const [streamList = "1,4,8", tokenArg = "64", roundArg = "3"] = process.argv.slice(2);
const streams = streamList.split(",").map(Number);
const TOKENS = Number(tokenArg);
const ROUNDS = Number(roundArg);
const parallel = Math.max(...streams);
const llama = await getLlamaRuntime();
console.log(`binary: ${llama.buildType}`);

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
const min = (a: number[]) => Math.min(...a);
const median = (a: number[]) => [...a].sort((x, y) => x - y)[a.length >> 1]!;

/**
 * Wraps the context's addon so the sequence id of every token of each llama_decode is recorded. llama.cpp computes
 * a decode in one pass per run of consecutive, increasing sequence ids (one KV stream per sequence).
 */
function recordDecodes(context: object): number[][] {
  const batches: number[][] = [];
  const holder = context as { _ctx: Record<string, (...a: unknown[]) => unknown> };
  const addon = holder._ctx;
  let batch: number[] = [];
  holder._ctx = new Proxy(addon, {
    get: (target, key) => {
      if (key === "initBatch") return (n: number) => ((batch = []), target.initBatch!(n));
      if (key === "addToBatch")
        return (sequenceId: number, first: number, tokens: Uint32Array, logits: Uint32Array) => {
          for (let i = 0; i < tokens.length; i++) batch.push(sequenceId);
          return target.addToBatch!(sequenceId, first, tokens, logits);
        };
      if (key === "decodeBatch") return () => (batches.push(batch), target.decodeBatch!());
      const value = target[key as string];
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return batches;
}
const passes = (ids: number[]) => ids.filter((id, i) => i === 0 || id !== ids[i - 1]! + 1).length;

// ---- 1. the kernel
{
  const model = await llama.loadModel({ modelPath: shapedModel() });
  const context = await model.createContext({ sequences: 8, contextSize: 512, threads: { ideal: 1, min: 1 } });
  const addon = (context as unknown as { _ctx: Record<string, (...a: unknown[]) => unknown> })._ctx;
  const position = new Array<number>(8).fill(0);
  const decode = async (k: number, perSequence: number) => {
    addon.initBatch!(k * perSequence);
    for (let s = 0; s < k; s++) {
      const tokens = Uint32Array.from({ length: perSequence }, (_, i) => 1 + ((position[s]! + i) % 200));
      addon.addToBatch!(s, position[s], tokens, Uint32Array.from([perSequence - 1]));
      position[s]! += perSequence;
    }
    const before = cpuMs();
    await addon.decodeBatch!();
    return cpuMs() - before;
  };
  await decode(8, 16);
  const ks = [1, 2, 3, 4, 8];
  const costs = new Map(ks.map((k) => [k, [] as number[]]));
  for (let round = 0; round < 15; round++) for (const k of ks) costs.get(k)!.push(await decode(k, 1));
  const one = min(costs.get(1)!);
  console.log(
    "kernel, CPU ms per llama_decode of K tokens (one per sequence):",
    ks.map((k) => `K=${k} ${min(costs.get(k)!).toFixed(1)} (${(min(costs.get(k)!) / one).toFixed(2)}x)`).join(", "),
  );
  await context.dispose();
  await model.dispose();
}

// ---- 2. the engine, with and without the lockstep gate (one engine; the gate is taken off and put back)
const raw = { models: [{ id: "probe", engine: "llama", source: shapedModel(), capabilities: ["chat"], contextSize: 512, parallel, threads: 1 }] };
const entry = testConfig(raw, path.join(process.cwd(), "config.yaml")).models[0]!;
const engine = new LlamaEngine(entry);
await engine.load();
const internals = engine as unknown as { context: object; sequences: LlamaContextSequence[]; lockstep: Lockstep };
const batches = recordDecodes(internals.context);
/** Without the gate, each sequence's evaluateWithMetadata is node-llama-cpp's own again (the engine as it was). */
function useGate(on: boolean): void {
  internals.sequences.forEach((sequence, id) => {
    delete (sequence as { evaluateWithMetadata?: unknown }).evaluateWithMetadata;
    if (on) internals.lockstep.attach(sequence, id);
  });
}
const variants = { lockstep: true, "no gate": false };

const request: ChatRequest = {
  messages: [{ role: "user", content: "Once upon a time" }],
  maxTokens: TOKENS,
  temperature: 0,
  topP: null,
  seed: null,
  stop: [],
  tools: [],
  toolChoice: "auto",
  responseFormat: "text",
  topLogprobs: null,
};
async function chat(seed: number): Promise<number> {
  const prepared = await engine.prepareChat({ ...request, seed });
  let tokens = 0;
  for await (const run of engine.chat({ ...request, seed }, prepared, new AbortController().signal)) for (const delta of run) if (delta.type === "done") tokens = delta.usage.completionTokens;
  return tokens;
}

type Row = { tps: number[]; cpu: number[]; decodes: number; perDecode: number; passes: number; order: string };
const rows = new Map<string, Row>();
await Promise.all(Array.from({ length: parallel }, (_, i) => chat(i))); // warm-up
for (let round = 0; round < ROUNDS; round++) {
  const names = Object.keys(variants) as (keyof typeof variants)[];
  for (const name of round % 2 ? names.reverse() : names) {
    useGate(variants[name]);
    for (const n of streams) {
      batches.length = 0;
      const cpu0 = cpuMs();
      const t0 = performance.now();
      const counts = await Promise.all(Array.from({ length: n }, (_, i) => chat(round * 100 + i)));
      const tokens = counts.reduce((a, b) => a + b, 0);
      const row = rows.get(`${name} ${n}`) ?? { tps: [], cpu: [], decodes: 0, perDecode: 0, passes: 0, order: "" };
      row.tps.push((tokens / (performance.now() - t0)) * 1000);
      row.cpu.push((cpuMs() - cpu0) / tokens);
      const generation = batches.filter((ids) => ids.length <= n);
      row.decodes = batches.length;
      row.perDecode = generation.reduce((a, ids) => a + ids.length, 0) / generation.length;
      row.passes = generation.reduce((a, ids) => a + passes(ids), 0) / generation.length;
      row.order = generation.at(-2)?.join(",") ?? "";
      rows.set(`${name} ${n}`, row);
    }
  }
}
for (const name of Object.keys(variants)) {
  const single = rows.get(`${name} 1`);
  for (const n of streams) {
    const row = rows.get(`${name} ${n}`)!;
    const scale = single ? ` (${(median(row.tps) / median(single.tps)).toFixed(2)}x 1 stream)` : "";
    console.log(
      `${name}, ${n} streams x ${TOKENS} tokens: ${median(row.tps).toFixed(1)} tok/s${scale}, ${median(row.cpu).toFixed(2)} CPU ms/token, ` +
        `${row.decodes} llama_decode calls, ${row.perDecode.toFixed(2)} tokens and ${row.passes.toFixed(2)} passes per generation decode (sequence order e.g. ${row.order})`,
    );
  }
}
for (const n of streams) {
  const [gated, plain] = [rows.get(`lockstep ${n}`)!, rows.get(`no gate ${n}`)!];
  console.log(
    `lockstep vs no gate, ${n} streams: ${(median(gated.tps) / median(plain.tps)).toFixed(2)}x tok/s, ` +
      `${(median(plain.cpu) / median(gated.cpu)).toFixed(2)}x tokens per CPU second`,
  );
}
await engine.unload();
