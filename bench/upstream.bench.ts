import { writeFileSync } from "node:fs";
import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { startLlamaServer } from "../harness/llama-server.ts";
import { spawnServer, tempDir } from "../harness/server.ts";
import { shapedModel } from "../harness/shaped-model.ts";
import { ratioRow, type BenchRow } from "./bench-row.ts";
import { startCanned } from "../harness/peers.ts";
import { autocannon, cannedModel, cpuMs, runNode, startPeer } from "./processes.ts";

/**
 * The upstream engine's cost (issue 17). Every server and every load generator is its own process; the sides are
 * alternated within each run, and each figure is the median of RUNS runs (min–max in the table).
 *
 * - Streaming passthrough: tokens/s of one client streaming from llama-server (SmolLM2-135M-shaped weights, so
 *   per-token cost is realistic) straight, and through Modelgate.
 * - Non-stream chat against a canned upstream (harness/canned-upstream.mjs): added p50 latency (sequential
 *   requests) straight vs through Modelgate vs through a minimal HTTPS→HTTP proxy (bench/peers/https-proxy.mjs),
 *   and throughput with autocannon at 16 connections, Modelgate vs the proxy.
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const client = (name: string) => path.join(import.meta.dirname, "clients", name);

export default async function upstreamBench(): Promise<BenchRow[]> {
  const dir = tempDir("bench-upstream-");
  const llama = await startLlamaServer(shapedModel(), ["-c", "1024", "-np", "1", "-t", "1"]);
  const canned = await startCanned();
  const raw = {
    dataDir: dir,
    plans: { bench: { rateLimit: { requests: 10_000_000, window: "1m" } } },
    defaultPlan: "bench",
    models: [
      cannedModel(canned.port),
      { id: "shaped", engine: "upstream", capabilities: ["chat"], upstreams: [{ url: `${llama.origin}/v1`, model: "shaped" }] },
    ],
  };
  const gateway = await spawnServer(raw, dir);
  const proxy = await startPeer("https-proxy.mjs", [path.join(dir, "tls/cert.pem"), path.join(dir, "tls/key.pem"), String(canned.port)]);
  const ca = path.join(dir, "tls/cert.pem");
  const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
  writeFileSync(path.join(dir, "key"), key);

  const stream = { direct: [] as number[], gateway: [] as number[] };
  const p50 = { direct: [] as number[], proxy: [] as number[], gateway: [] as number[] };
  const rps = { proxy: [] as number[], gateway: [] as number[] };
  // CPU µs per request of the proxy's process and of Modelgate's (Linux /proc): steadier than req/s on a shared machine.
  const cpuPerRequest = { proxy: [] as number[], gateway: [] as number[] };
  const chatBody = JSON.stringify({ model: "canned", messages: [{ role: "user", content: "Hello" }] });
  const directUrl = `http://127.0.0.1:${canned.port}/v1/chat/completions`;
  const proxyUrl = `https://127.0.0.1:${proxy.port}/v1/chat/completions`;
  const gatewayUrl = `${gateway.origin}/v1/chat/completions`;
  try {
    // Warm-up of the c=16 load, 10 s a side: Modelgate's path is long enough that V8 takes ~10 s of this load to
    // optimise it (CPU per request in consecutive 5-s runs: 2,099 → 1,545 → 802 µs, then flat); the proxy's is not.
    for (const [url, key_] of [[proxyUrl, undefined], [gatewayUrl, key]] as const) await autocannon({ url, body: chatBody, key: key_, seconds: 10 });
    for (let i = 0; i < RUNS; i++) {
      process.stderr.write(`  run ${i + 1}/${RUNS}\n`);
      const sides = i % 2 === 0 ? (["direct", "gateway"] as const) : (["gateway", "direct"] as const);
      for (const side of sides) {
        const args = side === "direct" ? [`${llama.origin}/v1/chat/completions`, "shaped", "128", "2"] : [gatewayUrl, "shaped", "128", "2", key, ca];
        stream[side].push((JSON.parse(await runNode([client("stream-client.mjs"), ...args])) as { tokensPerSecond: number }).tokensPerSecond);
      }
      const order = [["direct", directUrl, [] as string[]], ["proxy", proxyUrl, ["", ca]], ["gateway", gatewayUrl, [key, ca]]] as const;
      for (const [side, url, extra] of i % 2 === 0 ? order : [...order].reverse()) {
        p50[side].push((JSON.parse(await runNode([client("latency-client.mjs"), url, chatBody, "3", ...extra])) as { p50: number }).p50);
      }
      for (const side of i % 2 === 0 ? (["proxy", "gateway"] as const) : (["gateway", "proxy"] as const)) {
        const pid = side === "proxy" ? proxy.child.pid : gateway.child.pid;
        const before = cpuMs(pid);
        const load = await autocannon({ url: side === "proxy" ? proxyUrl : gatewayUrl, body: chatBody, key: side === "gateway" ? key : undefined, seconds: 5 });
        if (load.failed > 0) throw new Error(`${side}: ${load.failed} failed requests`);
        rps[side].push(load.rps);
        cpuPerRequest[side].push(((cpuMs(pid) - before) * 1000) / (load.rps * 5));
      }
    }
  } finally {
    await gateway.stop();
    proxy.child.kill();
    canned.child.kill();
    await llama.stop();
  }
  const added = (side: "gateway" | "proxy") => p50[side].map((v, i) => v - p50.direct[i]);
  return [
    ratioRow({ item: "upstream: stream tok/s via Modelgate vs straight to llama-server", service: stream.gateway, raw: stream.direct, unit: "tok/s", target: ">= 0.97" }),
    ratioRow({ item: "upstream: non-stream p50 added by Modelgate (ms, vs straight)", service: p50.gateway, raw: p50.direct, ratios: added("gateway"), unit: "ms", target: "<= 0.5 ms" }),
    ratioRow({ item: "upstream: non-stream p50 added by a minimal HTTPS proxy (ms)", service: p50.proxy, raw: p50.direct, ratios: added("proxy"), unit: "ms", target: "(reference)" }),
    ratioRow({ item: "upstream: non-stream req/s via Modelgate vs minimal proxy (c=16)", service: rps.gateway, raw: rps.proxy, unit: "req/s", target: ">= 0.5" }),
    ...(Number.isNaN(cpuPerRequest.proxy[0])
      ? []
      : [
          ratioRow({
            item: "upstream: non-stream, CPU per request, minimal proxy over Modelgate (c=16)",
            service: cpuPerRequest.gateway,
            raw: cpuPerRequest.proxy,
            ratios: cpuPerRequest.proxy.map((p, i) => p / cpuPerRequest.gateway[i]!),
            unit: "CPU µs/req",
            target: ">= 0.5",
          }),
        ]),
  ];
}
