import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { spawnServer, tempDir } from "../harness/server.ts";
import { ratioRow, type BenchRow } from "./bench-row.ts";
import { startCanned } from "../harness/peers.ts";
import { cannedModel, throughput } from "./processes.ts";

/**
 * Issue 19: what metrics and the access log cost. Two gateways (each its own process, default log level `info`)
 * in front of the same canned upstream: one as shipped (metrics and the access-log line on), one with
 * `metrics.enabled: false` (neither). autocannon (its own process) runs 5 s at 16 connections against each,
 * alternating; medians of RUNS, min–max of the ratio.
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);

export default async function observabilityBench(): Promise<BenchRow[]> {
  const canned = await startCanned();
  const gateway = async (enabled: boolean) => {
    const dir = tempDir("bench-observability-");
    const raw = {
      dataDir: dir,
      metrics: { enabled },
      plans: { bench: { rateLimit: { requests: 10_000_000, window: "1m" } } },
      defaultPlan: "bench",
      models: [cannedModel(canned.port)],
    };
    const server = await spawnServer(raw, dir);
    const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
    return { server, key, url: `${server.origin}/v1/chat/completions` };
  };
  const on = await gateway(true);
  const off = await gateway(false);
  const body = JSON.stringify({ model: "canned", messages: [{ role: "user", content: "Hello" }] });
  const rps = { on: [] as number[], off: [] as number[] };
  try {
    for (let i = 0; i < RUNS; i++) {
      process.stderr.write(`  run ${i + 1}/${RUNS}\n`);
      for (const side of i % 2 === 0 ? (["on", "off"] as const) : (["off", "on"] as const)) {
        const g = side === "on" ? on : off;
        rps[side].push(await throughput({ url: g.url, key: g.key, body, seconds: 5 }));
      }
    }
  } finally {
    await Promise.all([on.server.stop(), off.server.stop()]);
    canned.child.kill();
  }
  return [
    ratioRow({ item: "observability: req/s with metrics + access log vs without (c=16)", service: rps.on, raw: rps.off, unit: "req/s", target: ">= 0.95" }),
  ];
}
