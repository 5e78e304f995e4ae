import { writeFileSync } from "node:fs";
import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { spawnServer, tempDir, trustingFetch } from "../harness/server.ts";
import { ratioRow, type BenchRow } from "./bench-row.ts";
import { autocannon, benchRateLimit, loadWithCpu, startPeer } from "./processes.ts";

/**
 * Issue 23: the gateway's CPU per request. Authenticated GET /v1/models (API key, allowlist, limiter, scope
 * filter, access log at the default level `info`, metrics) on `modelgate serve` in its own process, against raw
 * Node HTTPS (bench/peers/static-https.mjs) answering the same bytes with the same certificate. autocannon, in a
 * third process, runs 16 connections for SECONDS against each, alternating which goes first; RUNS rounds.
 * On Linux it also reads each server's CPU time per request (/proc): on a machine shared with other work the
 * throughput ratio mostly says which process got the cores, where CPU per request is what each side costs.
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const SECONDS = 5;

export default async function gatewayBench(): Promise<BenchRow[]> {
  const dir = tempDir("bench-gateway-");
  const raw = {
    dataDir: dir,
    plans: { bench: { rateLimit: benchRateLimit } },
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
  const cpuPerRequest = { gateway: [] as number[], raw: [] as number[] };
  const pids = { gateway: gateway.child.pid, raw: peer.child.pid };
  const run = (side: "gateway" | "raw", seconds: number) => loadWithCpu(pids[side], side === "gateway" ? { url, key, seconds } : { url: rawUrl, seconds }, side);
  try {
    // Warm-up: JIT, TLS sessions, the key cache.
    await run("gateway", 2);
    await run("raw", 2);
    for (let i = 0; i < RUNS; i++) {
      process.stderr.write(`  run ${i + 1}/${RUNS}\n`);
      for (const side of i % 2 === 0 ? (["gateway", "raw"] as const) : (["raw", "gateway"] as const)) {
        const measured = await run(side, SECONDS);
        rps[side].push(measured.rps);
        cpuPerRequest[side].push(measured.cpuUs);
      }
    }
  } finally {
    await gateway.stop();
    peer.child.kill();
  }
  return [
    ratioRow({
      item: "gateway: authenticated GET /v1/models req/s vs raw Node HTTPS (c=16, log level info, out of process)",
      service: rps.gateway,
      raw: rps.raw,
      unit: "req/s",
      target: ">= 0.7",
    }),
    ...(Number.isNaN(cpuPerRequest.raw[0])
      ? []
      : [
          ratioRow({
            item: "gateway: authenticated GET /v1/models, CPU per request, raw Node HTTPS over Modelgate (c=16, log level info)",
            service: cpuPerRequest.gateway,
            raw: cpuPerRequest.raw,
            // raw's CPU per request over ours: the throughput ratio the gateway would have with the cores to itself.
            ratios: cpuPerRequest.raw.map((v, i) => v / cpuPerRequest.gateway[i]!),
            unit: "CPU µs/req",
            target: ">= 0.7",
          }),
        ]),
  ];
}
