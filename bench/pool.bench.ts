import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { spawnServer, tempDir } from "../harness/server.ts";
import { ratioRow, type BenchRow } from "./bench-row.ts";
import { startCanned } from "../harness/peers.ts";
import { autocannon, type Load } from "./processes.ts";

/**
 * Issue 18: what killing one of three upstreams mid-run costs. Modelgate (its own process) fronts a pool of three
 * canned upstreams (harness/canned-upstream.mjs, each its own process); autocannon (its own process) runs
 * 8 s at 16 connections. In the "kill" runs one upstream gets SIGKILL 3 s in (and is restarted for the next run);
 * "steady" runs kill nothing. The two kinds alternate; medians of RUNS each, min–max of the ratio.
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);

export default async function poolBench(): Promise<BenchRow[]> {
  const dir = tempDir("bench-pool-");
  const upstreams = await Promise.all([startCanned(), startCanned(), startCanned()]);
  const raw = {
    dataDir: dir,
    plans: { bench: { rateLimit: { requests: 10_000_000, window: "1m" } } },
    defaultPlan: "bench",
    models: [{ id: "pool", engine: "upstream", capabilities: ["chat"], upstreams: upstreams.map((u) => ({ url: `http://127.0.0.1:${u.port}/v1`, model: "canned" })), breaker: { cooldown: "2s" }, health: { interval: "1s" } }],
  };
  const gateway = await spawnServer(raw, dir);
  const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
  const url = `${gateway.origin}/v1/chat/completions`;
  const body = JSON.stringify({ model: "pool", messages: [{ role: "user", content: "Hello" }] });
  const steady: Load[] = [];
  const killed: Load[] = [];
  try {
    for (let i = 0; i < RUNS; i++) {
      process.stderr.write(`  run ${i + 1}/${RUNS}\n`);
      for (const kind of i % 2 === 0 ? ["steady", "kill"] : ["kill", "steady"]) {
        const load = autocannon({ url, key, body, seconds: 8 });
        if (kind === "kill") {
          await new Promise((r) => setTimeout(r, 3000));
          upstreams[0].child.kill("SIGKILL");
        }
        const result = await load;
        (kind === "kill" ? killed : steady).push(result);
        if (kind === "kill") {
          upstreams[0] = await startCanned(upstreams[0].port);
          await new Promise((r) => setTimeout(r, 2500)); // its breaker cooldown and two health checks
        }
      }
    }
  } finally {
    await gateway.stop();
    for (const u of upstreams) u.child.kill();
  }
  const failed = killed.reduce((n, k) => n + k.failed, 0) + steady.reduce((n, k) => n + k.failed, 0);
  return [
    ratioRow({ item: "pool: req/s with 1 of 3 upstreams killed at 3 s of 8 s, vs none killed", service: killed.map((k) => k.rps), raw: steady.map((k) => k.rps), unit: "req/s", target: "report" }),
    ratioRow({ item: "pool: p50 latency, killed vs steady (ms)", service: killed.map((k) => k.p50), raw: steady.map((k) => k.p50), unit: "ms", target: "report" }),
    ratioRow({ item: "pool: p99 latency, killed vs steady (ms)", service: killed.map((k) => k.p99), raw: steady.map((k) => k.p99), unit: "ms", target: "report" }),
    ratioRow({ item: "pool: failed requests over all runs (ratio = count)", service: failed, raw: 0, ratios: [failed], unit: "requests", target: "0" }),
  ];
}
