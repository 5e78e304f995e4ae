// `LABEL=name [SHAPE=burst|slow] [SERVER_ENV='{"MALLOC_ARENA_MAX":"2"}'] [NODE_FLAGS="--no-memory-reducer"] node
// --import tsx bench/soak/memory-probe.ts` (it compiles the tree first): issue 47's memory questions in minutes. One compiled
// server in front of the canned upstream; non-stream and streamed chat from autocannon (its own processes). A line of
// JSON per step: RSS and heap after the last major GC, RSS, heap total, the young and old generations V8 holds, and
// external memory. SERVER_ENV is the server's extra environment (an allocator setting), NODE_FLAGS its V8 flags (which
// NODE_OPTIONS refuses), for an A/B.
// - SHAPE=burst (default; ten minutes): does a burst leave RSS after major GC higher for good, or does it rise without
//   end? 2 connections each for 3 min, 24 each for 80 s, 2 each for 5 min, a line per 20 s.
// - SHAPE=slow (seven minutes): V8's memory reducer. 4 connections each for 2 min, 2 requests a second for 2 min (the
//   slow traffic after which the reducer shrinks the heap), 4 connections each for 3 min, a line per 10 s.
import path from "node:path";
import { readFileSync } from "node:fs";
import { createKey } from "../../harness/keys.ts";
import { testConfig } from "../../harness/config.ts";
import { startCanned } from "../../harness/peers.ts";
import { compiledCliPath, spawnServer, tempDir, trustingFetch } from "../../harness/server.ts";
import { autocannon, cannedModel } from "../processes.ts";
import { metric, series } from "./sampler.ts";

const label = process.env.LABEL ?? "default";
const shape = process.env.SHAPE ?? "burst";
const env: Record<string, string> = JSON.parse(process.env.SERVER_ENV ?? "{}");
const nodeFlags = (process.env.NODE_FLAGS ?? "").split(" ").filter(Boolean);
const token = "memory-probe-metrics-token-Qm3vT8xLp2Rk7sWz5nYc";
const dir = tempDir("memory-probe-");
const canned = await startCanned();
const raw = { dataDir: dir, metrics: { token }, plans: { bench: { rateLimit: { requests: 100000000, window: "1m" } } }, defaultPlan: "bench",
  models: [cannedModel(canned.port)] };
const server = await spawnServer(raw, dir, [], env, compiledCliPath(), nodeFlags);
const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
const { fetch } = trustingFetch(readFileSync(path.join(dir, "tls/cert.pem"), "utf8"));
const mb = (bytes: number) => (bytes / 1048576).toFixed(1);
const t0 = Date.now();
async function sample(phase: string) {
  const text = await (await fetch(`${server.origin}/metrics`, { headers: { authorization: `Bearer ${token}` } })).text();
  const space = (name: string) => mb(series(text, "modelgate_nodejs_heap_space_size_total_bytes", `space="${name}"`));
  console.log(JSON.stringify({ label, phase, s: Math.round((Date.now() - t0) / 1000), rssAfterGc: mb(metric(text, "modelgate_rss_after_major_gc_bytes")), heapAfterGc: mb(metric(text, "modelgate_heap_used_after_major_gc_bytes")), rss: mb(metric(text, "modelgate_process_resident_memory_bytes")), heapTotal: mb(metric(text, "modelgate_nodejs_heap_size_total_bytes")), young: space("new"), old: space("old"), external: mb(metric(text, "modelgate_nodejs_external_memory_bytes")) }));
}
const url = `${server.origin}/v1/chat/completions`;
const bodies = [false, true].map((stream) => JSON.stringify({ model: "canned", messages: [{ role: "user", content: "Hello" }], ...(stream ? { stream } : {}) }));
/** `seconds` of load in steps of `step` seconds, non-stream and streamed side by side, a sample after each step. */
async function phase(name: string, seconds: number, step: number, load: { connections: number; rate?: number }) {
  for (let s = 0; s < seconds; s += step) {
    await Promise.all(bodies.map((body) => autocannon({ url, key, body, seconds: step, ...load })));
    await sample(name);
  }
}
if (shape === "slow") {
  await phase("busy", 120, 10, { connections: 4 });
  await phase("slow", 120, 10, { connections: 1, rate: 1 });
  await phase("busy again", 180, 10, { connections: 4 });
} else {
  await phase("steady", 180, 20, { connections: 2 });
  await phase("burst", 80, 20, { connections: 24 });
  await phase("after", 300, 20, { connections: 2 });
}
await server.stop();
canned.child.kill();
