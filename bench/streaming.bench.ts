import { spawn } from "node:child_process";
import path from "node:path";
import { createInterface } from "node:readline";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { startLlamaServer } from "../harness/llama-server.ts";
import { modelsDir, spawnServer, tempDir } from "../harness/server.ts";
import { shapedModel } from "../harness/shaped-model.ts";
import { ratioRow, type BenchRow } from "./bench-row.ts";
import { runNode } from "./processes.ts";

/**
 * Issue 23: one streamed chat, tokens/s, on three sides, each in its own process: the raw engine
 * (bench/peers/raw-llama-chat.ts: node-llama-cpp LlamaChat, same wrapper, threads, context and sampling),
 * `modelgate serve` (default log level) read by bench/clients/stream-client.mjs over HTTPS, and llama.cpp's
 * llama-server read by the same client over HTTP. The sides' order rotates each round; RUNS rounds; tokens/s is
 * completion tokens over the wall time from request to the last byte.
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
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

/** The raw engine, loaded once; each `run` asks it for `requests` completions and reads back its tokens/s. */
async function startRaw(file: string, context: number) {
  const child = spawn(process.execPath, ["--import", "tsx", path.join(root, "bench/peers/raw-llama-chat.ts"), file, "1", String(context)], { stdio: ["pipe", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  await lines.next();
  return {
    async run(requests: number, tokens: number, seed: number): Promise<number> {
      child.stdin!.write(`${requests} ${tokens} ${seed}\n`);
      return (JSON.parse((await lines.next()).value as string) as { tokensPerSecond: number }).tokensPerSecond;
    },
    stop: () => child.kill(),
  };
}

async function client(url: string, model: string, tokens: number, requests: number, key = "", ca = ""): Promise<number> {
  const out = await runNode([streamClient, url, model, String(tokens), String(requests), key, ca]);
  return (JSON.parse(out) as { tokensPerSecond: number }).tokensPerSecond;
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
  const gateway = await spawnServer(raw, dir);
  const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
  const ca = path.join(dir, "tls/cert.pem");
  const rows: BenchRow[] = [];
  try {
    for (const c of cases) {
      const engine = await startRaw(c.file, c.context);
      const server = await startLlamaServer(c.file, ["-c", String(c.context), "-np", "1", "-t", "1", "-tb", "1"]);
      const sides = {
        raw: (seed: number) => engine.run(c.requests, c.tokens, seed),
        modelgate: () => client(`${gateway.origin}/v1/chat/completions`, c.id, c.tokens, c.requests, key, ca),
        "llama-server": () => client(`${server.origin}/v1/chat/completions`, c.id, c.tokens, c.requests),
      };
      const names = Object.keys(sides) as (keyof typeof sides)[];
      const rates: Record<keyof typeof sides, number[]> = { raw: [], modelgate: [], "llama-server": [] };
      try {
        for (const name of names) await sides[name](0); // warm-up
        for (let i = 0; i < RUNS; i++) {
          process.stderr.write(`  ${c.name} run ${i + 1}/${RUNS}\n`);
          for (let k = 0; k < names.length; k++) {
            const name = names[(i + k) % names.length]!;
            rates[name].push(await sides[name](i * c.requests + 1));
          }
        }
      } finally {
        engine.stop();
        await server.stop();
      }
      rows.push(
        ratioRow({ item: `stream 1x ${c.name}: Modelgate vs raw node-llama-cpp (out of process)`, service: rates.modelgate, raw: rates.raw, unit: "tok/s", target: c.target }),
        ratioRow({ item: `stream 1x ${c.name}: llama-server vs raw (peer, reference)`, service: rates["llama-server"], raw: rates.raw, unit: "tok/s", target: "reference" }),
      );
    }
  } finally {
    await gateway.stop();
  }
  return rows;
}
