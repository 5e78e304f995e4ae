import { readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { startListening, type Peer } from "../harness/peers.ts";
import { repoRoot, requester, spawnServer, tempDir, trustingFetch } from "../harness/server.ts";
import { spread, type BenchRow } from "./bench-row.ts";
import { cpuMs, runNode } from "./processes.ts";

/**
 * Issue 42.5: what refusing a flood costs the server. The gateway's CPU (user + system, every thread, from /proc)
 * per request, over three loads of autocannon (its own process, 8 connections, SECONDS each, sides alternated in
 * each run, medians of RUNS):
 * - admitted: the tenants bench's request (a streamed chat, 16 deltas) through an upstream pool whose upstream
 *   (harness/paced-upstream.mjs, its own process) streams it over 20 ms;
 * - refused 503: the same request to a model whose one slot is held by a request that lasts the whole bench and
 *   whose queue is 0 (`503 overloaded`, queue_full, what a flood beyond its share of the queue gets);
 * - refused 429: the same request with a key whose plan allows one request a day (`429 rate_limit_exceeded`).
 * Each refusal still costs the TLS read, the key check, the limiter, the access log line and the envelope.
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const SECONDS = Number(process.env.BENCH_REFUSAL_SECONDS ?? 5);
const CONNECTIONS = 8;
/** V8 takes about 10 s of a load to optimise the path it exercises (see upstream.bench.ts). */
const WARM_SECONDS = 10;
/**
 * How long the held model's one request streams: past the whole bench (autocannon takes about 2 s more than its
 * duration), with its 16 words spaced under the upstream idle timeout (30 s) so that it never stalls.
 */
const HOLD_MS = 3 * (WARM_SECONDS + 2 + RUNS * (SECONDS + 2)) * 1000 + 30_000;

type Side = "admitted" | "refused503" | "refused429";

interface Load {
  requests: number;
  statuses: Record<string, number>;
}

async function load(url: string, key: string, body: string, seconds: number): Promise<Load> {
  const args = ["-c", String(CONNECTIONS), "-d", String(seconds), "-m", "POST", "-H", "content-type=application/json", "-H", `authorization=Bearer ${key}`, "-b", body, "-j", url];
  const out = await runNode([path.join(repoRoot, "node_modules/autocannon/autocannon.js"), ...args]);
  const r = JSON.parse(out) as { requests: { total: number }; statusCodeStats: Record<string, { count: number }> };
  return { requests: r.requests.total, statuses: Object.fromEntries(Object.entries(r.statusCodeStats).map(([code, s]) => [code, s.count])) };
}

export default async function refusalsBench(): Promise<BenchRow[]> {
  const peers: Peer[] = [];
  const dir = tempDir("bench-refusals-");
  const perRequest: Record<Side, number[]> = { admitted: [], refused503: [], refused429: [] };
  try {
    if (HOLD_MS / 16 > 25_000) throw new Error("BENCH_RUNS × BENCH_REFUSAL_SECONDS too long for the held request");
    const paced = async (ms: number) => {
      const peer = await startListening(path.join(repoRoot, "harness/paced-upstream.mjs"), ["0", String(ms), "0"]);
      peers.push(peer);
      return `http://127.0.0.1:${peer.port}/v1`;
    };
    const raw = {
      dataDir: dir,
      plans: { bench: { rateLimit: { requests: 10_000_000, window: "1m" } }, limited: { rateLimit: { requests: 1, window: "24h" } } },
      defaultPlan: "bench",
      models: [
        { id: "open", engine: "upstream", capabilities: ["chat"], parallel: 16, upstreams: [{ url: await paced(20), model: "paced", maxInFlight: 16 }] },
        { id: "held", engine: "upstream", capabilities: ["chat"], parallel: 1, queueSize: 0, upstreams: [{ url: await paced(HOLD_MS), model: "paced", maxInFlight: 1 }] },
      ],
    };
    await measure(raw, dir, perRequest);
  } finally {
    for (const peer of peers) peer.child.kill();
    rmSync(dir, { recursive: true, force: true });
  }
  const admitted = spread(perRequest.admitted);
  const rows: BenchRow[] = [];
  for (const [name, label] of [
    ["refused503", "a 503 overloaded (queue full)"],
    ["refused429", "a 429 rate_limit_exceeded"],
  ] as const) {
    const refused = spread(perRequest[name]);
    const ratios = spread(perRequest[name].map((cost, k) => cost / perRequest.admitted[k]));
    rows.push({
      item: `refusals: gateway CPU per request, ${label} (service) vs an admitted streamed chat of 16 deltas (raw), c=${CONNECTIONS}`,
      service: refused.median,
      raw: admitted.median,
      unit: "µs",
      ratio: ratios.median,
      range: [ratios.min, ratios.max],
      target: "report",
    });
  }
  return rows;
}

/** Each side's gateway CPU per request, RUNS times, into `perRequest` (µs). */
async function measure(raw: Record<string, unknown>, dir: string, perRequest: Record<Side, number[]>): Promise<void> {
  const gateway = await spawnServer(raw, dir);
  const { fetch: tlsFetch, agent } = trustingFetch(readFileSync(path.join(dir, "tls/cert.pem"), "utf8"));
  const holder = new AbortController();
  try {
    const cfg = testConfig(raw, path.join(dir, "config.yaml"));
    const keys = { bench: (await createKey(cfg)).key, limited: (await createKey(cfg, { plan: "limited" })).key };
    const api = requester(tlsFetch, gateway.origin);
    const url = `${gateway.origin}/v1/chat/completions`;
    const body = (model: string) => ({ model, stream: true, messages: [{ role: "user", content: "Once upon a time" }] });
    // The held model's one slot: a stream that lasts the whole bench.
    const held = await api.post("/v1/chat/completions", body("held"), { key: keys.bench, signal: holder.signal });
    if (held.status !== 200) throw new Error(`the holding request got ${held.status}: ${await held.text()}`);
    // The limited key's one request of the day.
    await (await api.post("/v1/chat/completions", body("open"), { key: keys.limited })).arrayBuffer();
    const sides: Record<Side, { key: string; body: string; expect: string }> = {
      admitted: { key: keys.bench, body: JSON.stringify(body("open")), expect: "200" },
      refused503: { key: keys.bench, body: JSON.stringify(body("held")), expect: "503" },
      refused429: { key: keys.limited, body: JSON.stringify(body("open")), expect: "429" },
    };
    for (const side of Object.values(sides)) await load(url, side.key, side.body, WARM_SECONDS);
    for (let i = 0; i < RUNS; i++) {
      process.stderr.write(`  run ${i + 1}/${RUNS}\n`);
      const names = Object.keys(sides) as Side[];
      for (const name of names.map((_, k) => names[(k + i) % names.length])) {
        const side = sides[name];
        const before = cpuMs(gateway.child.pid);
        const got = await load(url, side.key, side.body, SECONDS);
        const cpu = cpuMs(gateway.child.pid) - before;
        const wrong = Object.keys(got.statuses).filter((code) => code !== side.expect);
        if (wrong.length > 0) throw new Error(`${name}: answers other than ${side.expect}: ${JSON.stringify(got.statuses)}`);
        perRequest[name].push((cpu * 1000) / got.requests);
        process.stderr.write(`    ${name}: ${got.requests} requests, ${cpu} ms CPU, ${((cpu * 1000) / got.requests).toFixed(0)} µs each\n`);
      }
    }
  } finally {
    holder.abort();
    await agent.close();
    await gateway.stop();
  }
}
