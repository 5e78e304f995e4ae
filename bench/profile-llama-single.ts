import { execFileSync } from "node:child_process";
import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { startLlamaServer } from "../harness/llama-server.ts";
import { spawnServer, tempDir } from "../harness/server.ts";
import { shapedModel, type ModelShape, type WeightType } from "../harness/shaped-model.ts";
import { cpuMs, perfRecorded, runNode } from "./processes.ts";
import { openAiSampling } from "../src/engines/llama-server/managed-llama-server-engine.ts";

/**
 * `node --import tsx bench/profile-llama-single.ts OUT_DIR [SHAPE=smollm2-135m] [TYPE=q8_0] [TOKENS=256] [ROUNDS=3]`:
 * one stream on the in-process `llama` engine (`modelgate serve`, parallel 1, 1 thread) and on llama-server
 * straight (-np 1, 1 thread), alternating for ROUNDS rounds, each run sampled by `perf record -e cpu-clock` (the only
 * event a VM without PMU access has) while bench/clients/stream-client.mjs reads TOKENS tokens from it. Prints, per
 * side, the median over the rounds of the CPU ms per token and of its share by area (the dot-product kernels, the
 * rest of ggml and llama.cpp, JavaScript, the kernel, libc and libm), then the top symbols of the last round
 * (OUT_DIR/<side>.perf.data stays for `perf report -i`).
 */
const [outArg = "profiles", shape = "smollm2-135m", type = "q8_0", tokenArg = "256", roundArg = "3"] = process.argv.slice(2);
const out = path.resolve(outArg);
const tokens = Number(tokenArg);
const rounds = Number(roundArg);
const root = path.resolve(import.meta.dirname, "..");
const model = shapedModel(shape as ModelShape, type as WeightType);
const dir = tempDir("profile-llama-single-");
const raw = {
  dataDir: dir,
  plans: { bench: { rateLimit: { requests: 10_000_000, window: "1m" } } },
  defaultPlan: "bench",
  llama: { server: "never" },
  models: [{ id: "inproc", engine: "llama", source: model, capabilities: ["chat"], contextSize: 512, parallel: 1, threads: 1 }],
};
// With JS_PROF=1 the gateway also writes a V8 CPU profile into OUT_DIR at exit (node bench/profile-top.mjs FILE).
const gateway = await spawnServer(raw, dir, [], process.env.JS_PROF ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${out}` } : {});
const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
const direct = await startLlamaServer(model, ["-c", "512", "-np", "1", "-t", "1", "-tb", "1", ...openAiSampling]);
const sides = [
  { name: "in-process", pid: gateway.child.pid!, url: `${gateway.origin}/v1/chat/completions`, auth: [key, path.join(dir, "tls/cert.pem")] },
  { name: "llama-server", pid: direct.child.pid!, url: `${direct.origin}/v1/chat/completions`, auth: ["", ""] },
];
const stream = (side: (typeof sides)[number], n: number) => runNode([path.join(root, "bench/clients/stream-client.mjs"), side.url, "inproc", String(n), "1", ...side.auth]);

/** The area a `perf report` line (samples, dso, symbol) counts in. */
function area(dso: string, symbol: string): string {
  if (symbol.startsWith("ggml_vec_dot_")) return "dot kernels";
  if (/ggml|llama/.test(dso)) return "rest of ggml + llama.cpp";
  if (dso === "node" || dso.startsWith("[JIT]")) return "JavaScript (node + JIT)";
  if (dso === "[kernel.kallsyms]") return "kernel";
  return "libc, libm, other";
}
const report = (file: string, ...args: string[]) =>
  execFileSync("perf", ["report", "-i", file, "--no-children", "--stdio", "-g", "none", ...args], { encoding: "utf8", maxBuffer: 64 << 20 })
    .split("\n")
    .filter((l) => l.trim() && !l.startsWith("#"));
/** CPU ms per token by area, from a profile and the CPU the run took. */
function byArea(file: string, perToken: number): Map<string, number> {
  const samples = new Map<string, number>();
  let total = 0;
  for (const line of report(file, "--sort", "dso,symbol", "-F", "sample,dso,sym", "-t", "\t")) {
    const [count, dso = "", symbol = ""] = line.split("\t").map((f) => f.trim());
    const name = area(dso, symbol.replace(/^\[.\] /, ""));
    samples.set(name, (samples.get(name) ?? 0) + Number(count));
    total += Number(count);
  }
  return new Map([...samples].map(([name, n]) => [name, (n / total) * perToken]));
}
const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;

try {
  for (const side of sides) await stream(side, 32); // warm-up
  const figures = new Map(sides.map((side) => [side.name, { rate: [] as number[], perToken: [] as number[], areas: [] as Map<string, number>[] }]));
  for (let round = 0; round < rounds; round++) {
    for (const side of round % 2 === 0 ? sides : [...sides].reverse()) {
      const file = path.join(out, `${side.name}.perf.data`);
      const before = cpuMs(side.pid);
      const rate = await perfRecorded(side.pid, file, 999, async () => JSON.parse(await stream(side, tokens)) as { tokensPerSecond: number });
      const perToken = (cpuMs(side.pid) - before) / tokens;
      const of = figures.get(side.name)!;
      of.rate.push(rate.tokensPerSecond);
      of.perToken.push(perToken);
      of.areas.push(byArea(file, perToken));
    }
  }
  for (const side of sides) {
    const of = figures.get(side.name)!;
    console.log(`\n== ${side.name} (${shape} ${type}, ${tokens} tokens, median of ${rounds}): ${median(of.rate).toFixed(1)} tok/s, ${median(of.perToken).toFixed(2)} CPU ms per token`);
    const names = [...new Set(of.areas.flatMap((m) => [...m.keys()]))];
    for (const name of names) console.log(`  ${name.padEnd(26)} ${median(of.areas.map((m) => m.get(name) ?? 0)).toFixed(2)} ms per token`);
    console.log("  top symbols of the last round:");
    for (const line of report(path.join(out, `${side.name}.perf.data`), "--sort", "dso,symbol", "--percent-limit", "1").slice(0, 12)) console.log(`  ${line.trim().replace(/\s+/g, " ")}`);
  }
} finally {
  await gateway.stop();
  await direct.stop();
}
