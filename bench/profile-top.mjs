// `node bench/profile-top.mjs FILE.cpuprofile [N] [LAST_SECONDS]`: the N (default 25) frames with the most self
// time, and the share of samples per source area (node internals, fastify, pino, our src/...), from a V8 CPU
// profile; with LAST_SECONDS, only the samples of the profile's last seconds (the measured load, not the start).
import { readFileSync } from "node:fs";

const [file, n = "25", last] = process.argv.slice(2);
const profile = JSON.parse(readFileSync(file, "utf8"));
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const self = new Map();
const from = last ? profile.endTime - Number(last) * 1e6 : -Infinity;
let t = profile.startTime;
let total = 0;
profile.samples.forEach((id, i) => {
  t += profile.timeDeltas[i];
  if (t < from) return;
  total++;
  self.set(id, (self.get(id) ?? 0) + 1);
});
const frames = new Map();
const areas = new Map();
const area = (url) => {
  if (!url) return "(native/gc/idle)";
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1];
  const s = /\/(src\/[^/]+)/.exec(url);
  if (s) return s[1];
  if (url.startsWith("node:")) return "node:" + url.slice(5).split("/")[0];
  return url.split("/").slice(-2).join("/");
};
for (const [id, count] of self) {
  const { callFrame } = byId.get(id);
  const key = `${callFrame.functionName || "(anonymous)"} ${callFrame.url.replace(/^.*\/(node_modules|src)\//, "$1/")}:${callFrame.lineNumber + 1}`;
  frames.set(key, (frames.get(key) ?? 0) + count);
  const a = callFrame.functionName === "(idle)" ? "(idle)" : callFrame.functionName === "(garbage collector)" ? "(gc)" : callFrame.functionName === "(program)" ? "(program)" : area(callFrame.url);
  areas.set(a, (areas.get(a) ?? 0) + count);
}
const pct = (c) => ((100 * c) / total).toFixed(1).padStart(5);
console.log(`${total} samples`);
console.log("top frames by self time:");
for (const [key, count] of [...frames].sort((a, b) => b[1] - a[1]).slice(0, Number(n))) console.log(`${pct(count)}%  ${key}`);
console.log("by area:");
for (const [key, count] of [...areas].sort((a, b) => b[1] - a[1]).slice(0, 20)) console.log(`${pct(count)}%  ${key}`);

// Inclusive time of our own functions (src/): the samples under each, a function counted once per stack.
const parent = new Map();
for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
const inclusive = new Map();
for (const [id, count] of self) {
  const seen = new Set();
  for (let at = id; at !== undefined; at = parent.get(at)) {
    const { callFrame } = byId.get(at);
    if (!/\/src\//.test(callFrame.url)) continue;
    const key = `${callFrame.functionName || "(anonymous)"} ${callFrame.url.replace(/^.*\/src\//, "src/")}`;
    if (seen.has(key)) continue;
    seen.add(key);
    inclusive.set(key, (inclusive.get(key) ?? 0) + count);
  }
}
console.log("our functions by inclusive time:");
for (const [key, count] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, Number(n))) console.log(`${pct(count)}%  ${key}`);
