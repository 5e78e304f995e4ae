import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { llamaServerBinary, startLlamaServer } from "../harness/llama-server.ts";
import { spawnServer, tempDir } from "../harness/server.ts";
import { shapedModel, type ModelShape, type WeightType } from "../harness/shaped-model.ts";
import { ratioRow, type BenchRow } from "./bench-row.ts";
import { cpuMs, gatewayEntry, startLineProcess, startRawLlamaChat, treeCpuMs, type LineProcess } from "./processes.ts";
import { openAiSampling } from "../src/engines/llama-server/managed-llama-server-engine.ts";

/**
 * Issues 24, 35 and 46.4: concurrent streams on shaped models (the forge's real-model bodies, random weights), 1
 * thread everywhere, for each model of BENCH_MODELS (`shape:type` items, comma-separated; by default the
 * SmolLM2-135M shape in f16 and in Q8_0, and the Qwen3-0.6B shape in Q8_0, the default catalog's chat model), one
 * model after another. The sides, each its own process, read by bench/clients/stream-client.mjs (a process per side
 * and stream count, kept up across the runs):
 * `modelgate serve` (the compiled build, bench/processes.ts gatewayEntry) with the in-process `llama` engine (parallel 4, and parallel 1 and 8; `llama.server: never`),
 * a second `modelgate serve` whose `engine: llama` entries (parallel 4 and 1) run on the managed llama-server
 * (`llama.server: always` with a built binary; `auto` places the parallel-4 one alike), and llama-server straight
 * (-np 4, and -np 8 for 8 streams; sampling the whole distribution as the in-process engine does, not llama-server's
 * default top-k 40 and min-p 0.05), and for 1 stream node-llama-cpp's LlamaChat alone (bench/peers/raw-llama-chat.ts,
 * the in-process engine's floor: two native jobs a token, a decode then a sample, where llama-server loops in one
 * thread). Each round runs every side's stream counts (aggregate tok/s), the order of the
 * sides rotating each round; RUNS rounds. BENCH_STREAMS (default 1,4,8; 1,4 for qwen3-0.6b) picks the counts,
 * BENCH_TOKENS the tokens per stream (default 96; 24 for qwen3-0.6b, about 4x slower per token).
 * On Linux it also reads the CPU time the serving processes spent per token (the gateway process for in-process;
 * llama-server's own; the gateway and its llama-server child for managed): steadier than wall time on a shared
 * machine, and what capacity is made of. The shaped models never stop early, so a run's tokens are TOKENS x streams.
 * bench/probe-llama-batching.ts explains the in-process figures (tokens and passes per llama_decode, the kernel's
 * cost per decode size); bench/profile-llama-single.ts profiles one stream on both engines.
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const CONTEXT = 512;
const root = path.resolve(import.meta.dirname, "..");
const models = (process.env.BENCH_MODELS ?? "smollm2-135m:f16,smollm2-135m:q8_0,qwen3-0.6b:q8_0").split(",").map((item) => {
  const [shape, type] = item.split(":") as [ModelShape, WeightType];
  const small = shape === "smollm2-135m";
  return {
    shape,
    type,
    label: `${shape} shape ${type === "q8_0" ? "Q8_0" : type}`,
    tokens: Number(process.env.BENCH_TOKENS ?? (small ? 96 : 24)),
    streams: (process.env.BENCH_STREAMS ?? (small ? "1,4,8" : "1,4")).split(",").map(Number),
    /** Issue 46.4's targets are for the quantization people run. */
    quantized: type === "q8_0",
  };
});
type Model = (typeof models)[number];

/** Each side's aggregate tok/s and the serving CPU ms per token, run by run, keyed `side streams`. */
interface Measured {
  rate(side: string, streams: number): number[];
  cpu(side: string, streams: number): number[];
}

async function measure(model: Model): Promise<Measured> {
  const file = shapedModel(model.shape, model.type);
  const dir = tempDir("bench-batching-");
  const plans = { bench: { rateLimit: { requests: 10_000_000, window: "1m" } } };
  const entry = (id: string, parallel: number) => ({ id, engine: "llama", source: file, capabilities: ["chat"], contextSize: CONTEXT, parallel, threads: 1 });
  const eight = model.streams.includes(8);
  const raw = { dataDir: dir, plans, defaultPlan: "bench", llama: { server: "never" }, models: [entry("inproc", 4), entry("inproc1", 1), ...(eight ? [entry("inproc8", 8)] : [])] };
  // The same engine: llama entries, placed on the managed llama-server (same data dir and key).
  const placed = { ...raw, llama: { server: "always", serverBinary: llamaServerBinary() }, models: [entry("managed", 4), entry("managed1", 1)] };
  const gateway = await spawnServer(raw, dir, [], {}, gatewayEntry());
  const onServer = await spawnServer(placed, dir, [], {}, gatewayEntry());
  const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
  const ca = path.join(dir, "tls/cert.pem");
  const direct = await startLlamaServer(file, ["-c", String(CONTEXT * 4), "-np", "4", "-t", "1", "-tb", "1", ...openAiSampling]);
  // node-llama-cpp's LlamaChat alone (same model, context, threads, wrapper and sampling): the floor of the in-process
  // engine's single stream, which llama-server's own loop is not bound by.
  const raw1 = model.streams.includes(1) ? await startRawLlamaChat(file, CONTEXT) : null;
  let rawSeed = 1;
  const direct8 = eight ? await startLlamaServer(file, ["-c", String(CONTEXT * 8), "-np", "8", "-t", "1", "-tb", "1", ...openAiSampling]) : null;
  // One client process per side and stream count, kept up across the runs and so warmed with its side (decision 0053).
  const clients = new Map<string, LineProcess>();
  const client = async (url: string, id: string, concurrency: number, auth: string[]) => {
    const name = `${url} ${id} ${concurrency}`;
    let reader = clients.get(name);
    if (!reader) clients.set(name, (reader = startLineProcess([path.join(root, "bench/clients/stream-client.mjs"), url, id, String(model.tokens), "stdin", ...auth, String(concurrency)])));
    return (JSON.parse(await reader.ask("1")) as { tokensPerSecond: number }).tokensPerSecond;
  };
  const viaGateway = (id: string, origin = gateway.origin) => (c: number) => client(`${origin}/v1/chat/completions`, id, c, [key, ca]);
  const straight = (origin: string) => (c: number) => client(`${origin}/v1/chat/completions`, "direct", c, ["", ""]);
  const few = model.streams.filter((c) => c <= 4);
  // Each side, the stream counts it runs in a round and the CPU its tokens cost.
  const sides = [
    { name: "in-process", run: viaGateway("inproc"), counts: few, cpu: () => cpuMs(gateway.child.pid) },
    { name: "in-process p1", run: viaGateway("inproc1"), counts: few.includes(1) ? [1] : [], cpu: () => cpuMs(gateway.child.pid) },
    { name: "managed", run: viaGateway("managed", onServer.origin), counts: few, cpu: () => treeCpuMs(onServer.child.pid) },
    { name: "managed p1", run: viaGateway("managed1", onServer.origin), counts: few.includes(1) ? [1] : [], cpu: () => treeCpuMs(onServer.child.pid) },
    { name: "llama-server", run: straight(direct.origin), counts: few, cpu: () => cpuMs(direct.child.pid) },
    ...(raw1
      ? [{ name: "raw", run: async () => (await raw1.run(1, model.tokens, rawSeed++)).tokensPerSecond, counts: [1], cpu: () => cpuMs(raw1.pid) }]
      : []),
    ...(direct8
      ? [
          { name: "in-process p8", run: viaGateway("inproc8"), counts: [8], cpu: () => cpuMs(gateway.child.pid) },
          { name: "llama-server np8", run: straight(direct8.origin), counts: [8], cpu: () => cpuMs(direct8.child.pid) },
        ]
      : []),
  ].filter((side) => side.counts.length > 0);
  const rates = new Map<string, number[]>();
  const cpus = new Map<string, number[]>();
  for (const side of sides) for (const c of side.counts) rates.set(`${side.name} ${c}`, []), cpus.set(`${side.name} ${c}`, []);
  try {
    for (const side of sides) for (const c of side.counts) await side.run(c); // warm-up: each client and its side
    for (let i = 0; i < RUNS; i++) {
      process.stderr.write(`  ${model.label}: run ${i + 1}/${RUNS}\n`);
      for (let k = 0; k < sides.length; k++) {
        const side = sides[(i + k) % sides.length]!;
        for (const c of side.counts) {
          const before = side.cpu();
          rates.get(`${side.name} ${c}`)!.push(await side.run(c));
          cpus.get(`${side.name} ${c}`)!.push((side.cpu() - before) / (model.tokens * c));
        }
      }
    }
  } finally {
    for (const reader of clients.values()) reader.stop();
    raw1?.stop();
    await gateway.stop();
    await onServer.stop();
    await direct.stop();
    await direct8?.stop();
  }
  const read = (of: Map<string, number[]>) => (side: string, streams: number) => of.get(`${side} ${streams}`) ?? [];
  return { rate: read(rates), cpu: read(cpus) };
}

/** The rows of one model: the throughput ratios, then tokens per CPU second (higher is better, as above). */
function rowsOf(model: Model, m: Measured): BenchRow[] {
  const at = `(${model.label})`;
  const q = model.quantized;
  const rows: BenchRow[] = [];
  const versus = (item: string, a: number[], b: number[], target: string) => {
    if (a.length > 0 && b.length > 0) rows.push(ratioRow({ item: `${item} ${at}`, service: a, raw: b, unit: "tok/s", target }));
  };
  const perCpu = (item: string, a: number[], b: number[], target = "report") => {
    if (a.length > 0 && b.length > 0 && !Number.isNaN(a[0]!)) rows.push(ratioRow({ item: `CPU: ${item} ${at}`, service: a.map((v) => 1000 / v), raw: b.map((v) => 1000 / v), unit: "tok/CPU s", target }));
  };
  const { rate, cpu } = m;
  versus("batching: in-process llama vs llama-server, 1 stream", rate("in-process", 1), rate("llama-server", 1), q ? ">= 0.95" : "report (0.85 before)");
  versus("batching: in-process llama vs raw node-llama-cpp (LlamaChat alone, its floor), 1 stream", rate("in-process", 1), rate("raw", 1), q ? ">= 0.95" : "report");
  versus("batching: raw node-llama-cpp vs llama-server, 1 stream (the in-process engine's floor, reference)", rate("raw", 1), rate("llama-server", 1), "reference");
  versus("batching: in-process llama vs llama-server, 4 streams aggregate", rate("in-process", 4), rate("llama-server", 4), q ? ">= 0.95" : ">= 0.9");
  versus("batching: in-process llama, 4 streams vs 1", rate("in-process", 4), rate("in-process", 1), ">= 1.6");
  versus("batching: llama-server straight, 4 streams vs 1 (reference)", rate("llama-server", 4), rate("llama-server", 1), "reference");
  versus("batching: in-process llama parallel 8, 8 streams vs 1 stream (parallel 4)", rate("in-process p8", 8), rate("in-process", 1), "report");
  versus("batching: in-process llama vs llama-server, 8 streams aggregate (parallel 8, -np 8)", rate("in-process p8", 8), rate("llama-server np8", 8), "report");
  versus("batching: llama-server straight, 8 streams (-np 8) vs 1 (reference)", rate("llama-server np8", 8), rate("llama-server", 1), "reference");
  versus("engine: llama on the managed llama-server vs llama-server straight, 1 stream", rate("managed", 1), rate("llama-server", 1), ">= 0.97");
  versus("engine: llama on the managed llama-server vs llama-server straight, 4 streams", rate("managed", 4), rate("llama-server", 4), ">= 0.97");
  versus("engine: llama, 4 streams aggregate: on the managed llama-server vs in-process", rate("managed", 4), rate("in-process", 4), "report");
  versus("engine: llama parallel 1, 1 stream: on the managed llama-server vs in-process", rate("managed p1", 1), rate("in-process p1", 1), "report (llama.server auto's choice)");
  perCpu("in-process llama vs llama-server, tokens per CPU s, 1 stream", cpu("in-process", 1), cpu("llama-server", 1), q ? ">= 0.95" : "report");
  perCpu("in-process llama vs raw node-llama-cpp, tokens per CPU s, 1 stream", cpu("in-process", 1), cpu("raw", 1));
  perCpu("raw node-llama-cpp vs llama-server, tokens per CPU s, 1 stream (reference)", cpu("raw", 1), cpu("llama-server", 1));
  perCpu("in-process llama vs llama-server, tokens per CPU s, 4 streams", cpu("in-process", 4), cpu("llama-server", 4), q ? ">= 0.95" : "report");
  perCpu("in-process llama, tokens per CPU s, 4 streams vs 1", cpu("in-process", 4), cpu("in-process", 1));
  perCpu("llama-server straight, tokens per CPU s, 4 streams vs 1 (reference)", cpu("llama-server", 4), cpu("llama-server", 1));
  perCpu("in-process llama vs llama-server, tokens per CPU s, 8 streams (parallel 8, -np 8)", cpu("in-process p8", 8), cpu("llama-server np8", 8));
  perCpu("engine: llama parallel 1, tokens per CPU s, 1 stream: on the managed llama-server (gateway + child) vs in-process", cpu("managed p1", 1), cpu("in-process p1", 1));
  return rows;
}

export default async function batchingBench(): Promise<BenchRow[]> {
  const measured: BenchRow[][] = [];
  for (const model of models) measured.push(rowsOf(model, await measure(model)));
  // The same item of each model side by side (f16 beside Q8_0), in the order of the first model's rows.
  const item = (row: BenchRow) => row.item.replace(/ \([^()]+ shape [^()]+\)$/, "");
  const order = [...new Set(measured.flat().map(item))];
  return measured.flat().sort((a, b) => order.indexOf(item(a)) - order.indexOf(item(b)));
}
