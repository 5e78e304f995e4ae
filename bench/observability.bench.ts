import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { createKey } from "../test/helpers/keys.ts";
import { testConfig } from "../test/helpers/config.ts";
import { spawnServer, tempDir } from "../test/helpers/server.ts";
import { spread, type BenchRow } from "./bench-row.ts";

/**
 * Issue 19: what metrics and the access log cost. Two gateways (each its own process, default log level `info`)
 * in front of the same canned upstream: one as shipped (metrics and the access-log line on), one with
 * `metrics.enabled: false` (neither). autocannon (its own process) runs 5 s at 16 connections against each,
 * alternating; medians of RUNS, min–max of the ratio.
 */
const RUNS = 5;
const root = path.resolve(import.meta.dirname, "..");

function startCanned(): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, [path.join(import.meta.dirname, "peers/canned-upstream.mjs")], { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve) => child.stdout!.setEncoding("utf8").once("data", (d: string) => resolve({ child, port: Number(/listening (\d+)/.exec(d)![1]) })));
}

function throughput(url: string, key: string, body: string): Promise<number> {
  const child = spawn(process.execPath, [path.join(root, "node_modules/autocannon/autocannon.js"), "-c", "16", "-d", "5", "-m", "POST", "-H", "content-type=application/json", "-H", `authorization=Bearer ${key}`, "-b", body, "-j", url], { stdio: ["ignore", "pipe", "ignore"] });
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
  return new Promise((resolve, reject) =>
    child.once("exit", () => {
      const r = JSON.parse(out) as { requests: { average: number }; non2xx: number; errors: number };
      if (r.non2xx || r.errors) reject(new Error(`${url}: ${r.non2xx} non-2xx, ${r.errors} errors`));
      else resolve(r.requests.average);
    }),
  );
}

export default async function observabilityBench(): Promise<BenchRow[]> {
  const canned = await startCanned();
  const gateway = async (enabled: boolean) => {
    const dir = tempDir("bench-observability-");
    const raw = {
      dataDir: dir,
      metrics: { enabled },
      plans: { bench: { rateLimit: { requests: 10_000_000, window: "1m" } } },
      defaultPlan: "bench",
      models: [{ id: "canned", engine: "upstream", capabilities: ["chat"], upstreams: [{ url: `http://127.0.0.1:${canned.port}/v1`, model: "canned", maxInFlight: 256 }] }],
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
        rps[side].push(await throughput(g.url, g.key, body));
      }
    }
  } finally {
    await Promise.all([on.server.stop(), off.server.stop()]);
    canned.child.kill();
  }
  const ratio = spread(rps.on.map((v, i) => v / rps.off[i]));
  return [
    { item: "observability: req/s with metrics + access log vs without (c=16)", service: spread(rps.on).median, raw: spread(rps.off).median, unit: "req/s", ratio: ratio.median, range: [ratio.min, ratio.max], target: ">= 0.95" },
  ];
}
