import { writeFileSync } from "node:fs";
import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { spawnServer, tempDir, trustingFetch } from "../harness/server.ts";
import { spread, type BenchRow } from "./bench-row.ts";
import { startPeer, throughput } from "./processes.ts";

/**
 * Issue 23: the gateway's CPU per request. Authenticated GET /v1/models (API key, allowlist, limiter, scope
 * filter, access log at the default level `info`, metrics) on `modelgate serve` in its own process, against raw
 * Node HTTPS (bench/peers/static-https.mjs) answering the same bytes with the same certificate. autocannon, in a
 * third process, runs 16 connections for SECONDS against each, alternating which goes first; RUNS rounds.
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const SECONDS = 5;

export default async function gatewayBench(): Promise<BenchRow[]> {
  const dir = tempDir("bench-gateway-");
  const raw = {
    dataDir: dir,
    plans: { bench: { rateLimit: { requests: 100_000_000, window: "1m" } } },
    defaultPlan: "bench",
    models: [
      { id: "bench-chat", engine: "llama", source: "/nonexistent/bench-chat.gguf", capabilities: ["chat"], load: "lazy" },
      { id: "bench-embed", engine: "llama", source: "/nonexistent/bench-embed.gguf", capabilities: ["embeddings"], load: "lazy" },
    ],
  };
  const gateway = await spawnServer(raw, dir);
  const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
  const url = `${gateway.origin}/v1/models`;
  const { fetch, agent } = trustingFetch((await import("node:fs")).readFileSync(path.join(dir, "tls/cert.pem"), "utf8"));
  const body = await (await fetch(url, { headers: { authorization: `Bearer ${key}` } })).text();
  await agent.close();
  const bodyFile = path.join(dir, "models.json");
  writeFileSync(bodyFile, body);
  const peer = await startPeer("static-https.mjs", [path.join(dir, "tls/cert.pem"), path.join(dir, "tls/key.pem"), bodyFile]);
  const rawUrl = `https://127.0.0.1:${peer.port}/v1/models`;

  const rps = { gateway: [] as number[], raw: [] as number[] };
  try {
    // Warm-up: JIT, TLS sessions, the key cache.
    await throughput({ url, key, seconds: 2 });
    await throughput({ url: rawUrl, seconds: 2 });
    for (let i = 0; i < RUNS; i++) {
      process.stderr.write(`  run ${i + 1}/${RUNS}\n`);
      for (const side of i % 2 === 0 ? (["gateway", "raw"] as const) : (["raw", "gateway"] as const)) {
        rps[side].push(side === "gateway" ? await throughput({ url, key, seconds: SECONDS }) : await throughput({ url: rawUrl, seconds: SECONDS }));
      }
    }
  } finally {
    await gateway.stop();
    peer.child.kill();
  }
  const ratio = spread(rps.gateway.map((v, i) => v / rps.raw[i]));
  return [
    {
      item: "gateway: authenticated GET /v1/models req/s vs raw Node HTTPS (c=16, log level info, out of process)",
      service: spread(rps.gateway).median,
      raw: spread(rps.raw).median,
      unit: "req/s",
      ratio: ratio.median,
      range: [ratio.min, ratio.max],
      target: ">= 0.7",
    },
  ];
}
