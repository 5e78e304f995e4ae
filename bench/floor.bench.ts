import path from "node:path";
import { startCanned } from "../harness/peers.ts";
import { spawnServer, tempDir } from "../harness/server.ts";
import { ratioRow, type BenchRow } from "./bench-row.ts";
import { autocannon, loadWithCpu, runNode, startPeer } from "./processes.ts";

/**
 * Issue 35's gateway targets against the floor of Modelgate's own stack: the minimal HTTPS proxy
 * (bench/peers/https-proxy.mjs) and bench/peers/fastify-floor.mjs (Fastify, pino's access line at info, undici to
 * the upstream, nothing else) in front of the canned upstream, as JSON and as a stream (which Modelgate reads, for
 * its stall timeouts). Non-stream chat: p50 added by sequential requests, and CPU per request and req/s at c=16,
 * each side in its own process, rotating, RUNS runs after a warm-up.
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);

export default async function floorBench(): Promise<BenchRow[]> {
  const dir = tempDir("bench-floor-");
  // A server started once only to write its TLS material, which every side serves.
  await (await spawnServer({ dataDir: dir, models: [] }, dir)).stop();
  const cert = path.join(dir, "tls/cert.pem");
  const key = path.join(dir, "tls/key.pem");
  const canned = await startCanned();
  const peers = {
    proxy: await startPeer("https-proxy.mjs", [cert, key, String(canned.port)]),
    "fastify-json": await startPeer("fastify-floor.mjs", [cert, key, String(canned.port), "json"]),
    "fastify-sse": await startPeer("fastify-floor.mjs", [cert, key, String(canned.port), "sse"]),
  };
  const names = Object.keys(peers) as (keyof typeof peers)[];
  const url = (name: keyof typeof peers) => `https://127.0.0.1:${peers[name].port}/v1/chat/completions`;
  const body = JSON.stringify({ model: "canned", messages: [{ role: "user", content: "Hello" }] });
  const directUrl = `http://127.0.0.1:${canned.port}/v1/chat/completions`;
  const added = Object.fromEntries(names.map((n) => [n, [] as number[]]));
  const cpu = Object.fromEntries(names.map((n) => [n, [] as number[]]));
  const rps = Object.fromEntries(names.map((n) => [n, [] as number[]]));
  try {
    for (const name of names) await autocannon({ url: url(name), body, seconds: 5 });
    for (let i = 0; i < RUNS; i++) {
      process.stderr.write(`  run ${i + 1}/${RUNS}\n`);
      const direct = (JSON.parse(await runNode([path.join(import.meta.dirname, "clients/latency-client.mjs"), directUrl, body, "3"])) as { p50: number }).p50;
      for (let k = 0; k < names.length; k++) {
        const name = names[(i + k) % names.length]!;
        const p50 = (JSON.parse(await runNode([path.join(import.meta.dirname, "clients/latency-client.mjs"), url(name), body, "3", "", cert])) as { p50: number }).p50;
        added[name]!.push(p50 - direct);
        const load = await loadWithCpu(peers[name].child.pid, { url: url(name), body, seconds: 5 }, name);
        rps[name]!.push(load.rps);
        cpu[name]!.push(load.cpuUs);
      }
    }
  } finally {
    for (const peer of Object.values(peers)) peer.child.kill();
    canned.child.kill();
  }
  const rows: BenchRow[] = [];
  for (const name of names) {
    rows.push(ratioRow({ item: `floor: non-stream chat, p50 added (ms), ${name}`, service: added[name]!, raw: 0, ratios: added[name]!, unit: "ms", target: "(reference: Modelgate ≤ 0.5 ms)" }));
  }
  for (const name of names.filter((n) => n !== "proxy")) {
    rows.push(
      // The proxy's CPU per request over this side's: the throughput ratio each would have with the cores to itself.
      ratioRow({ item: `floor: CPU per request, minimal proxy over ${name} (c=16)`, service: cpu[name]!, raw: cpu.proxy!, ratios: cpu.proxy!.map((p, i) => p / cpu[name]![i]!), unit: "CPU µs/req", target: "(reference: Modelgate ≥ 0.5)" }),
      ratioRow({ item: `floor: req/s, ${name} vs minimal proxy (c=16)`, service: rps[name]!, raw: rps.proxy!, unit: "req/s", target: "(reference: Modelgate ≥ 0.5)" }),
    );
  }
  return rows;
}
