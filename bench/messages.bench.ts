import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { startCanned } from "../harness/peers.ts";
import { spawnServer, tempDir } from "../harness/server.ts";
import { ratioRow, type BenchRow } from "./bench-row.ts";
import { autocannon, benchRateLimit, cannedModel, loadWithCpu } from "./processes.ts";

/**
 * Issue 44 Proof: what Anthropic's dialect costs. One `modelgate serve` (its own process, log level info) in front of
 * the canned upstream (harness/canned-upstream.mjs, its own process) streams the same answer two ways: as
 * `POST /v1/messages` (Anthropic's events) and as `POST /v1/chat/completions` (OpenAI's chunks). autocannon (a
 * third process) runs 16 connections for SECONDS against each, alternating which goes first, RUNS rounds; each
 * figure is the gateway's CPU per request (/proc).
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const SECONDS = 5;

export default async function messagesBench(): Promise<BenchRow[]> {
  const canned = await startCanned();
  const dir = tempDir("bench-messages-");
  const raw = {
    dataDir: dir,
    plans: { bench: { rateLimit: benchRateLimit } },
    defaultPlan: "bench",
    models: [cannedModel(canned.port)],
  };
  const gateway = await spawnServer(raw, dir);
  const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
  const messages = [{ role: "user", content: "Hello" }];
  const sides = {
    messages: { url: `${gateway.origin}/v1/messages`, body: JSON.stringify({ model: "canned", max_tokens: 100, stream: true, messages }) },
    chat: { url: `${gateway.origin}/v1/chat/completions`, body: JSON.stringify({ model: "canned", max_tokens: 100, stream: true, messages }) },
  } as const;
  const cpuPerRequest = { messages: [] as number[], chat: [] as number[] };
  const run = async (side: keyof typeof sides, seconds: number) => (await loadWithCpu(gateway.child.pid, { ...sides[side], key, seconds }, side)).cpuUs;
  try {
    // Warm-up, 10 s a side: V8 takes about that long under this load to optimise the path (bench/upstream.bench.ts).
    await run("messages", 10);
    await run("chat", 10);
    for (let i = 0; i < RUNS; i++) {
      process.stderr.write(`  run ${i + 1}/${RUNS}\n`);
      for (const side of i % 2 === 0 ? (["messages", "chat"] as const) : (["chat", "messages"] as const)) cpuPerRequest[side].push(await run(side, SECONDS));
    }
  } finally {
    await gateway.stop();
    canned.child.kill();
  }
  if (Number.isNaN(cpuPerRequest.chat[0])) return [];
  return [
    ratioRow({
      item: "messages: streamed /v1/messages through upstream, CPU per request over streamed /v1/chat/completions (c=16, canned upstream)",
      service: cpuPerRequest.messages,
      raw: cpuPerRequest.chat,
      unit: "µs CPU/req",
      target: "<= 1.1",
    }),
  ];
}
