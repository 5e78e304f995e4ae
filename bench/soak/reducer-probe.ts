// `LABEL=name [NODE_FLAGS="--min-semi-space-size=16"] node --import tsx bench/soak/reducer-probe.ts` (after `npm run
// build`): issue 47's sawtooth in seven minutes. One compiled server (started with NODE_FLAGS before its script: V8
// flags that NODE_OPTIONS refuses) in front of the canned upstream; non-stream and streamed chat from autocannon (its
// own processes) at 4 connections each for 2 min, then at 2 requests a second for 2 min (the slow traffic after which
// V8's memory reducer shrinks the heap), then at 4 connections each again for 3 min. A line of JSON per 10 s: RSS and
// heap after the last major GC, RSS, heap total, and the young and old generations V8 holds.
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import YAML from "yaml";
import { createKey } from "../../harness/keys.ts";
import { testConfig } from "../../harness/config.ts";
import { startCanned } from "../../harness/peers.ts";
import { repoRoot, tempDir, trustingFetch } from "../../harness/server.ts";
import { runNode } from "../processes.ts";
import { metric as bytesOf } from "./sampler.ts";

const label = process.env.LABEL ?? "default";
const nodeFlags = (process.env.NODE_FLAGS ?? "").split(" ").filter(Boolean);
const dir = tempDir("reducer-");
const canned = await startCanned();
const token = "reducer-metrics-token-Qm3vT8xLp2Rk7sWz5nYc";
const raw = { dataDir: dir, metrics: { token }, plans: { bench: { rateLimit: { requests: 100000000, window: "1m" } } }, defaultPlan: "bench",
  models: [{ id: "canned", engine: "upstream", capabilities: ["chat"], upstreams: [{ url: `http://127.0.0.1:${canned.port}/v1`, model: "canned", maxInFlight: 256 }] }] };
const configFile = path.join(dir, "config.yaml");
writeFileSync(configFile, YAML.stringify(raw));
const server = spawn(process.execPath, [...nodeFlags, path.join(repoRoot, "dist/cli/run.js"), "serve", "--config", configFile, "--port", "0"], { stdio: ["ignore", "pipe", "ignore"] });
const origin = await new Promise<string>((resolve) => {
  let buffer = "";
  server.stdout!.setEncoding("utf8").on("data", (d: string) => {
    buffer += d;
    const match = /listening (https:\/\/\S+)/.exec(buffer);
    if (match) (resolve(match[1]!), (buffer = ""));
  });
});
const { key } = await createKey(testConfig(raw, configFile));
const { fetch } = trustingFetch(readFileSync(path.join(dir, "tls/cert.pem"), "utf8"));
const mb = (text: string, name: string) => (bytesOf(text, name) / 1048576).toFixed(1);
const space = (text: string, name: string) => (Number(text.split("\n").find((l) => l.startsWith(`modelgate_nodejs_heap_space_size_total_bytes{space="${name}"}`))?.split(" ").at(-1)) / 1048576).toFixed(1);
const t0 = Date.now();
async function sample(phase: string) {
  const text = await (await fetch(`${origin}/metrics`, { headers: { authorization: `Bearer ${token}` } })).text();
  console.log(JSON.stringify({ label, phase, s: Math.round((Date.now() - t0) / 1000), rssAfterGc: mb(text, "modelgate_rss_after_major_gc_bytes"), heapAfterGc: mb(text, "modelgate_heap_used_after_major_gc_bytes"), rss: mb(text, "modelgate_process_resident_memory_bytes"), heapTotal: mb(text, "modelgate_nodejs_heap_size_total_bytes"), young: space(text, "new"), old: space(text, "old") }));
}
const url = `${origin}/v1/chat/completions`;
const bodies = [{ model: "canned", messages: [{ role: "user", content: "Hello" }] }, { model: "canned", messages: [{ role: "user", content: "Hello" }], stream: true }].map((b) => JSON.stringify(b));
const load = (body: string, args: string[]) => runNode([path.join(repoRoot, "node_modules/autocannon/autocannon.js"), ...args, "-m", "POST", "-H", "content-type=application/json", "-H", `authorization=Bearer ${key}`, "-b", body, "-j", url]);
async function phase(name: string, seconds: number, args: string[]) {
  for (let s = 0; s < seconds; s += 10) {
    await Promise.all(bodies.map((b) => load(b, ["-d", "10", ...args])));
    await sample(name);
  }
}
await phase("busy", 120, ["-c", "4"]);
await phase("slow", 120, ["-c", "1", "--overallRate", "1"]);
await phase("busy again", 180, ["-c", "4"]);
server.kill();
canned.child.kill();
