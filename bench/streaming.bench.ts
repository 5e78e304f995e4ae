import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { startLlamaServer } from "../harness/llama-server.ts";
import { modelsDir, spawnServer, tempDir } from "../harness/server.ts";
import { shapedModel } from "../harness/shaped-model.ts";
import { ratioRow, type BenchRow } from "./bench-row.ts";
import { cpuMs, gatewayEntry, startLineProcess, startRawLlamaChat } from "./processes.ts";
import { warmUp } from "./warm-up.ts";
import { openAiSampling } from "../src/engines/llama-server/managed-llama-server-engine.ts";

/**
 * Issues 23 and 46.5: one streamed chat, tokens/s, on three sides, each in its own process: the raw engine
 * (bench/peers/raw-llama-chat.ts: node-llama-cpp LlamaChat, same wrapper, threads, context and sampling),
 * `modelgate serve` (default log level; the compiled build, bench/processes.ts gatewayEntry) read by bench/clients/stream-client.mjs over HTTPS, and llama.cpp's
 * llama-server read by the same client over HTTP; each client one process kept up for the case, so that it is warmed
 * with its side (a client started per run measured its own cold start: decision 0053). The sides first run in turn until each has run WARM_SECONDS
 * (their steady state), then their order rotates each round; RUNS rounds; tokens/s is completion tokens over the
 * wall time from request to the last byte. On Linux it also reads each serving process's CPU time per token (the
 * raw engine's whole process; the gateway's; llama-server's).
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const WARM_SECONDS = Number(process.env.BENCH_WARM_SECONDS ?? 10);
const root = path.resolve(import.meta.dirname, "..");
const streamClient = path.join(root, "bench/clients/stream-client.mjs");

interface Case {
  name: string;
  id: string;
  file: string;
  context: number;
  tokens: number;
  requests: number;
  target: string;
}

/** What a side reports: its tokens per second of wall time, and the completion tokens it got. */
interface Streamed {
  tokensPerSecond: number;
  tokens: number;
}

/** A stream client of its own process, kept up (and so warm) across the runs; each run's seeds follow the raw engine's. */
function startClient(url: string, model: string, tokens: number, key = "", ca = "") {
  const client = startLineProcess([streamClient, url, model, String(tokens), "stdin", key, ca]);
  return {
    run: async (requests: number, seed: number) => JSON.parse(await client.ask(`${requests} ${Math.max(0, seed - 1)}`)) as Streamed,
    stop: client.stop,
  };
}

export default async function streamingBench(): Promise<BenchRow[]> {
  const cases: Case[] = [
    { name: "stories260K", id: "stories", file: path.join(modelsDir, "stories260K.gguf"), context: 512, tokens: 256, requests: 8, target: ">= 0.95" },
    { name: "smollm2-135m shape", id: "shaped", file: shapedModel(), context: 1024, tokens: 128, requests: 2, target: ">= 0.98" },
  ];
  const dir = tempDir("bench-streaming-");
  const raw = {
    dataDir: dir,
    plans: { bench: { rateLimit: { requests: 10_000_000, window: "1m" } } },
    defaultPlan: "bench",
    models: cases.map((c) => ({ id: c.id, engine: "llama", source: c.file, capabilities: ["chat"], contextSize: c.context, parallel: 1, threads: 1 })),
  };
  const gateway = await spawnServer(raw, dir, [], {}, gatewayEntry());
  const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
  const ca = path.join(dir, "tls/cert.pem");
  const rows: BenchRow[] = [];
  try {
    for (const c of cases) {
      const engine = await startRawLlamaChat(c.file, c.context);
      const server = await startLlamaServer(c.file, ["-c", String(c.context), "-np", "1", "-t", "1", "-tb", "1", ...openAiSampling]);
      const viaGateway = startClient(`${gateway.origin}/v1/chat/completions`, c.id, c.tokens, key, ca);
      const viaServer = startClient(`${server.origin}/v1/chat/completions`, c.id, c.tokens);
      const sides = {
        raw: { pid: engine.pid, run: (seed: number) => engine.run(c.requests, c.tokens, seed) },
        modelgate: { pid: gateway.child.pid, run: (seed: number) => viaGateway.run(c.requests, seed) },
        "llama-server": { pid: server.child.pid, run: (seed: number) => viaServer.run(c.requests, seed) },
      };
      const names = Object.keys(sides) as (keyof typeof sides)[];
      const rates: Record<keyof typeof sides, number[]> = { raw: [], modelgate: [], "llama-server": [] };
      /** Tokens per CPU second of the serving process, run by run. */
      const perCpu: Record<keyof typeof sides, number[]> = { raw: [], modelgate: [], "llama-server": [] };
      try {
        await warmUp(names.map((name) => () => sides[name].run(0)), WARM_SECONDS);
        for (let i = 0; i < RUNS; i++) {
          process.stderr.write(`  ${c.name} run ${i + 1}/${RUNS}\n`);
          for (let k = 0; k < names.length; k++) {
            const name = names[(i + k) % names.length]!;
            const before = cpuMs(sides[name].pid);
            const run = await sides[name].run(i * c.requests + 1);
            rates[name].push(run.tokensPerSecond);
            perCpu[name].push((run.tokens * 1000) / (cpuMs(sides[name].pid) - before));
          }
        }
      } finally {
        engine.stop();
        viaGateway.stop();
        viaServer.stop();
        await server.stop();
      }
      rows.push(
        ratioRow({ item: `stream 1x ${c.name}: Modelgate vs raw node-llama-cpp (out of process)`, service: rates.modelgate, raw: rates.raw, unit: "tok/s", target: c.target }),
        ratioRow({ item: `stream 1x ${c.name}: llama-server vs raw (peer, reference)`, service: rates["llama-server"], raw: rates.raw, unit: "tok/s", target: "reference" }),
        ...(Number.isNaN(perCpu.raw[0]!)
          ? []
          : [
              ratioRow({ item: `CPU: stream 1x ${c.name}: Modelgate (gateway process) vs raw node-llama-cpp (its process), tokens per CPU s`, service: perCpu.modelgate, raw: perCpu.raw, unit: "tok/CPU s", target: "report" }),
              ratioRow({ item: `CPU: stream 1x ${c.name}: llama-server vs raw, tokens per CPU s (peer, reference)`, service: perCpu["llama-server"], raw: perCpu.raw, unit: "tok/CPU s", target: "reference" }),
            ]),
      );
    }
  } finally {
    await gateway.stop();
  }
  return rows;
}
