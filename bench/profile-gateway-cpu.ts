import path from "node:path";
import { startFloorSides } from "./floor-sides.ts";
import { cpuSplit, type CpuSplit } from "./perf-split.ts";
import { autocannon, perfRecorded } from "./processes.ts";

/**
 * `node --import tsx bench/profile-gateway-cpu.ts OUT_DIR [chat|stream|models]`: where the CPU of a request goes,
 * Modelgate (the compiled build) beside the floor of its own stack (bench/peers/fastify-floor.mjs), under the
 * floor-gateway bench's loads: non-stream chat through `engine: upstream` to the canned upstream, the same chat
 * streamed, or authenticated GET /v1/models, c=16. Each side is warmed for 12 s, then `perf record -e cpu-clock`
 * samples it for 8 s of the same load. Prints, per side, the microseconds of CPU per request by the kind of code
 * and by the file of the innermost JavaScript frame (bench/perf-split.ts); OUT_DIR keeps the perf.data files.
 */
const out = path.resolve(process.argv[2] ?? "profiles");
const what = process.argv[3] ?? "chat";
const HZ = 1999;
const perfMaps = ["--perf-basic-prof"];
const { gateway, key, floor, stop } = await startFloorSides({ gatewayEnv: { NODE_OPTIONS: perfMaps.join(" ") }, floorNodeArgs: perfMaps });

const body = what === "models" ? undefined : JSON.stringify({ model: "canned", messages: [{ role: "user", content: "Hello" }], ...(what === "stream" ? { stream: true } : {}) });
const route = what === "models" ? "/v1/models" : "/v1/chat/completions";
const sides = [
  { name: "modelgate", url: gateway.origin + route, key, pid: gateway.child.pid! },
  { name: "floor", url: `https://127.0.0.1:${floor.port}${route}`, key: undefined, pid: floor.child.pid! },
];
const splits: { name: string; requests: number; split: CpuSplit }[] = [];
try {
  for (const side of sides) {
    await autocannon({ url: side.url, body, key: side.key, seconds: 12 });
    const file = path.join(out, `${side.name}-${what}.perf.data`);
    const load = await perfRecorded(side.pid, file, HZ, () => autocannon({ url: side.url, body, key: side.key, seconds: 8 }));
    if (load.failed > 0) throw new Error(`${side.name}: ${load.failed} failed requests`);
    splits.push({ name: side.name, requests: load.rps * 8, split: cpuSplit(file) });
  }
} finally {
  await stop();
}

const perRequest = (samples: number, requests: number) => ((samples / HZ) * 1e6) / requests;
for (const table of ["byKind", "byOwner"] as const) {
  const keys = [...new Set(splits.flatMap((s) => [...s.split[table]].filter(([, n]) => perRequest(n, s.requests) >= 0.5).map(([k]) => k)))];
  const total = (k: string) => splits.reduce((sum, s) => sum + perRequest(s.split[table].get(k) ?? 0, s.requests), 0);
  console.log(`\nµs of CPU per request ${table === "byKind" ? "by kind of code" : "by owner (the innermost JavaScript frame's file)"}: ${splits.map((s) => s.name).join(" | ")}`);
  for (const k of keys.sort((a, b) => total(b) - total(a))) {
    console.log(`  ${k.padEnd(48)} ${splits.map((s) => perRequest(s.split[table].get(k) ?? 0, s.requests).toFixed(1).padStart(7)).join(" | ")}`);
  }
}
console.log(`\nin all: ${splits.map((s) => `${s.name} ${perRequest(s.split.samples, s.requests).toFixed(0)} µs per request at ${(s.requests / 8).toFixed(0)} req/s`).join(", ")}`);
