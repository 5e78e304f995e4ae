// `LABEL=name [SERVER_ENV='{"MALLOC_ARENA_MAX":"2"}'] node --import tsx bench/soak/burst-probe.ts` (after `npm run
// build`): issue 47's question in ten minutes: does a burst leave RSS after major GC higher for good, or does it rise
// without end? One compiled server in front of the canned upstream; non-stream and streamed chat from autocannon
// (its own processes) at 2 connections each for 3 min, at 24 each for 80 s, at 2 each for 5 min; a line of JSON per
// 20 s with RSS and heap after the last major GC, RSS, heap total and external memory. SERVER_ENV is the server's
// extra environment (an allocator setting, V8 flags in NODE_OPTIONS) for an A/B.
import path from "node:path";
import { readFileSync } from "node:fs";
import { createKey } from "../../harness/keys.ts";
import { testConfig } from "../../harness/config.ts";
import { startCanned } from "../../harness/peers.ts";
import { repoRoot, spawnServer, tempDir, trustingFetch } from "../../harness/server.ts";
import { autocannon } from "../processes.ts";
import { metric as bytesOf } from "./sampler.ts";
const label = process.env.LABEL ?? "default";
const env: Record<string, string> = JSON.parse(process.env.SERVER_ENV ?? "{}");
const dir = tempDir("burst-");
const canned = await startCanned();
const raw = { dataDir: dir, metrics: { token: "burst-metrics-token-Qm3vT8xLp2Rk7sWz5nYc" }, plans: { bench: { rateLimit: { requests: 100000000, window: "1m" } } }, defaultPlan: "bench",
  models: [{ id: "canned", engine: "upstream", capabilities: ["chat"], upstreams: [{ url: `http://127.0.0.1:${canned.port}/v1`, model: "canned", maxInFlight: 256 }] }] };
const g = await spawnServer(raw, dir, [], env, path.join(repoRoot, "dist/cli/run.js"));
const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
const { fetch } = trustingFetch(readFileSync(path.join(dir, "tls/cert.pem"), "utf8"));
const metric = (text: string, name: string) => bytesOf(text, name) / 1048576;
const t0 = Date.now();
async function sample(phase: string) {
  const text = await (await fetch(`${g.origin}/metrics`, { headers: { authorization: "Bearer burst-metrics-token-Qm3vT8xLp2Rk7sWz5nYc" } })).text();
  console.log(JSON.stringify({ label, phase, s: Math.round((Date.now() - t0) / 1000), rssAfterGc: metric(text, "modelgate_rss_after_major_gc_bytes").toFixed(1), heapAfterGc: metric(text, "modelgate_heap_used_after_major_gc_bytes").toFixed(1), rss: metric(text, "modelgate_process_resident_memory_bytes").toFixed(1), heapTotal: metric(text, "modelgate_nodejs_heap_size_total_bytes").toFixed(1), external: metric(text, "modelgate_nodejs_external_memory_bytes").toFixed(1) }));
}
const chat = JSON.stringify({ model: "canned", messages: [{ role: "user", content: "Hello" }] });
const stream = JSON.stringify({ model: "canned", messages: [{ role: "user", content: "Hello" }], stream: true });
const url = `${g.origin}/v1/chat/completions`;
async function phase(name: string, seconds: number, connections: number) {
  for (let s = 0; s < seconds; s += 20) {
    await Promise.all([autocannon({ url, key, body: chat, connections, seconds: 20 }), autocannon({ url, key, body: stream, connections, seconds: 20 })]);
    await sample(name);
  }
}
await phase("steady", 180, 2);
await phase("burst", 80, 24);
await phase("after", 300, 2);
await g.stop();
canned.child.kill();
