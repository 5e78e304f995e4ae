import { execFileSync, spawn } from "node:child_process";
import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { startLlamaServer } from "../harness/llama-server.ts";
import { spawnServer, tempDir } from "../harness/server.ts";
import { shapedModel, type ModelShape, type WeightType } from "../harness/shaped-model.ts";
import { cpuMs, runNode } from "./processes.ts";

/**
 * `node --import tsx bench/profile-llama-single.ts OUT_DIR [SHAPE=smollm2-135m] [TYPE=q8_0] [TOKENS=256]`: one
 * stream on the in-process `llama` engine (`modelgate serve`, parallel 1, 1 thread) and on llama-server straight
 * (-np 1, 1 thread), each sampled by `perf record -e cpu-clock` (the only event a VM without PMU access has) while
 * bench/clients/stream-client.mjs reads TOKENS tokens from it. Prints each side's CPU ms per token and the top
 * symbols of each profile (OUT_DIR/<side>.perf.data stays for `perf report -i`).
 */
const [outArg = "profiles", shape = "smollm2-135m", type = "q8_0", tokenArg = "256"] = process.argv.slice(2);
const out = path.resolve(outArg);
const tokens = Number(tokenArg);
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
const gateway = await spawnServer(raw, dir);
const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
const direct = await startLlamaServer(model, ["-c", "512", "-np", "1", "-t", "1", "-tb", "1"]);
const sides = [
  { name: "in-process", pid: gateway.child.pid!, url: `${gateway.origin}/v1/chat/completions`, auth: [key, path.join(dir, "tls/cert.pem")] },
  { name: "llama-server", pid: direct.child.pid!, url: `${direct.origin}/v1/chat/completions`, auth: ["", ""] },
];
const stream = (side: (typeof sides)[number], n: number) => runNode([path.join(root, "bench/clients/stream-client.mjs"), side.url, "inproc", String(n), "1", ...side.auth]);

/** `perf record` on a running process until `work` settles. */
async function recorded<T>(pid: number, file: string, work: () => Promise<T>): Promise<T> {
  const perf = spawn("perf", ["record", "-e", "cpu-clock", "-F", "999", "-g", "-p", String(pid), "-o", file], { stdio: "ignore" });
  await new Promise((r) => setTimeout(r, 500));
  try {
    return await work();
  } finally {
    const exited = new Promise((r) => perf.once("exit", r));
    perf.kill("SIGINT");
    await exited;
  }
}

try {
  for (const side of sides) await stream(side, 32); // warm-up
  for (const side of sides) {
    const file = path.join(out, `${side.name}.perf.data`);
    const before = cpuMs(side.pid);
    const rate = await recorded(side.pid, file, async () => JSON.parse(await stream(side, tokens)) as { tokensPerSecond: number });
    const perToken = (cpuMs(side.pid) - before) / tokens;
    console.log(`\n== ${side.name}: ${rate.tokensPerSecond.toFixed(1)} tok/s, ${perToken.toFixed(2)} CPU ms per token (${type}, ${shape})`);
    const report = execFileSync("perf", ["report", "-i", file, "--no-children", "--sort", "dso,symbol", "--stdio", "--percent-limit", "0.7", "-g", "none"], { encoding: "utf8", maxBuffer: 64 << 20 });
    console.log(report.split("\n").filter((l) => l.trim() && !l.startsWith("#")).join("\n"));
  }
} finally {
  await gateway.stop();
  await direct.stop();
}
