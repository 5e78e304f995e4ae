import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { startCanned } from "../harness/peers.ts";
import { spawnServer, tempDir } from "../harness/server.ts";
import { ratioRow, type BenchRow } from "./bench-row.ts";
import { autocannon, benchRateLimit, cpuMs } from "./processes.ts";

/**
 * Issue 45.1: what a route costs. One `modelgate serve` (its own process, log level info) in front of the canned
 * upstream (harness/canned-upstream.mjs, its own process) serves non-stream chat two ways: naming the catalog entry,
 * and naming a route without fallbacks (a 50/50 weighted split over that entry and a twin of it, so the sticky
 * hash of account and conversation is paid). autocannon (a third process) runs 16 connections for SECONDS against
 * each, alternating which goes first, RUNS rounds; each figure is the gateway's CPU per request (/proc).
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const SECONDS = 5;

export default async function routingRoutesBench(): Promise<BenchRow[]> {
  const canned = await startCanned();
  const dir = tempDir("bench-routing-");
  const upstream = { engine: "upstream", capabilities: ["chat"], upstreams: [{ url: `http://127.0.0.1:${canned.port}/v1`, model: "canned", maxInFlight: 256 }] };
  const raw = {
    dataDir: dir,
    plans: { bench: { rateLimit: benchRateLimit } },
    defaultPlan: "bench",
    models: [
      { id: "canned", ...upstream },
      { id: "canned-twin", ...upstream },
    ],
    routes: [{ id: "chat-default", targets: [{ model: "canned", weight: 1 }, { model: "canned-twin", weight: 1 }] }],
  };
  const gateway = await spawnServer(raw, dir);
  const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
  const url = `${gateway.origin}/v1/chat/completions`;
  const body = (model: string) => JSON.stringify({ model, messages: [{ role: "user", content: "Hello" }] });
  const sides = { route: body("chat-default"), entry: body("canned") } as const;
  const cpuPerRequest = { route: [] as number[], entry: [] as number[] };
  const run = async (side: keyof typeof sides, seconds: number) => {
    const before = cpuMs(gateway.child.pid);
    const load = await autocannon({ url, key, body: sides[side], seconds });
    if (load.failed > 0) throw new Error(`${side}: ${load.failed} failed requests`);
    return ((cpuMs(gateway.child.pid) - before) * 1000) / (load.rps * seconds);
  };
  try {
    // Warm-up: JIT, TLS sessions, the key cache, the upstream connections.
    await run("route", 2);
    await run("entry", 2);
    for (let i = 0; i < RUNS; i++) {
      process.stderr.write(`  run ${i + 1}/${RUNS}\n`);
      for (const side of i % 2 === 0 ? (["route", "entry"] as const) : (["entry", "route"] as const)) cpuPerRequest[side].push(await run(side, SECONDS));
    }
  } finally {
    await gateway.stop();
    canned.child.kill();
  }
  if (Number.isNaN(cpuPerRequest.entry[0])) return [];
  return [
    ratioRow({
      item: "routing: non-stream chat through a route without fallbacks, CPU per request over the entry named directly (c=16, canned upstream)",
      service: cpuPerRequest.route,
      raw: cpuPerRequest.entry,
      unit: "µs CPU/req",
      target: "<= 1.05",
    }),
  ];
}
