// Outage drill (issue 16), not a test: a paced load against a real `modelgate serve` process while Redis, then
// PostgreSQL, is cut by a TCP proxy. Prints per phase (before / during / after) the status counts and the latency
// percentiles, and the latency added during the cut.
//
//   node --import tsx bench/outages.ts [--rate 20] [--seconds 6]
//
// The load generator is this process; the server is its own process. The phases' medians and p99 are what
// docs/operations.md ("When a shared service goes away") quotes.
import { readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { createKey, freshPostgresBehindProxy, redisTestUrl } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { requester, spawnServer, tempDir, trustingFetch } from "../harness/server.ts";
import { TcpProxy } from "../harness/tcp-proxy.ts";

const { values } = parseArgs({ options: { rate: { type: "string", default: "20" }, seconds: { type: "string", default: "6" } } });
const rate = Number(values.rate);
const phaseMs = Number(values.seconds) * 1000;

interface Sample {
  ms: number;
  status: number | "error";
}

/** Sends `rate` requests per second for `ms`, each on its own schedule (not waiting for the previous one). */
async function pacedLoad(call: () => Promise<Response>, ms: number): Promise<Sample[]> {
  const samples: Promise<Sample>[] = [];
  const started = performance.now();
  for (let i = 0; performance.now() - started < ms; i++) {
    const at = started + (i * 1000) / rate;
    const wait = at - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const t0 = performance.now();
    samples.push(
      call().then(
        async (res) => {
          await res.arrayBuffer();
          return { ms: performance.now() - t0, status: res.status };
        },
        () => ({ ms: performance.now() - t0, status: "error" as const }),
      ),
    );
  }
  return Promise.all(samples);
}

function percentile(xs: number[], p: number): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

function describe(samples: Sample[]): { counts: string; p50: number; p99: number } {
  const counts = new Map<string, number>();
  for (const s of samples) counts.set(String(s.status), (counts.get(String(s.status)) ?? 0) + 1);
  const ms = samples.map((s) => s.ms);
  return { counts: [...counts].map(([k, v]) => `${v}×${k}`).join(" "), p50: percentile(ms, 50), p99: percentile(ms, 99) };
}

async function drill(name: string, raw: Record<string, unknown>, dir: string, keyOptions: object, proxy: TcpProxy, mode: "refuse" | "blackhole") {
  const { key } = await createKey(testConfig(raw, null), keyOptions);
  const server = await spawnServer(raw, dir);
  try {
    const { fetch } = trustingFetch(readFileSync(path.join(raw.dataDir as string, "tls", "cert.pem"), "utf8"));
    const { get } = requester(fetch, server.origin);
    const call = () => get("/v1/models", { key });
    await pacedLoad(call, 1000);
    const before = describe(await pacedLoad(call, phaseMs));
    proxy.cut(mode);
    const during = describe(await pacedLoad(call, phaseMs));
    proxy.restore();
    const after = describe(await pacedLoad(call, phaseMs));
    const rows = [
      ["before", before],
      [`${name} cut (${mode})`, during],
      ["after", after],
    ] as const;
    for (const [phase, d] of rows) console.log(`| ${name} | ${phase} | ${d.counts} | ${d.p50.toFixed(1)} | ${d.p99.toFixed(1)} |`);
    console.log(`| ${name} | added during the cut | | ${(during.p50 - before.p50).toFixed(1)} | ${(during.p99 - before.p99).toFixed(1)} |`);
  } finally {
    await server.stop();
  }
}

console.log(`paced load: GET /v1/models at ${rate}/s, ${phaseMs / 1000} s per phase`);
console.log("| service | phase | statuses | p50 ms | p99 ms |\n|---|---|---|---|---|");

const { proxy: redisProxy, url: redisUrl } = await TcpProxy.inFrontOf(redisTestUrl);
const redisDir = tempDir();
await drill(
  "Redis",
  { dataDir: path.join(redisDir, "data"), models: [], redis: { url: redisUrl }, plans: { big: { rateLimit: { requests: 1_000_000, window: "1m" } } } },
  redisDir,
  { plan: "big" },
  redisProxy,
  "blackhole",
);
await redisProxy.close();
rmSync(redisDir, { recursive: true, force: true });

const db = await freshPostgresBehindProxy();
const pgDir = tempDir();
await drill(
  "PostgreSQL",
  { dataDir: path.join(pgDir, "data"), models: [], keySecret: "outages-bench-key-secret-0123456789", database: { url: db.url }, plans: { big: { rateLimit: { requests: 1_000_000, window: "1m" } } } },
  pgDir,
  { plan: "big" },
  db.proxy,
  "refuse",
);
await db.close();
rmSync(pgDir, { recursive: true, force: true });
