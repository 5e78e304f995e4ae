import path from "node:path";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { startCanned } from "../harness/peers.ts";
import { spawnServer, tempDir } from "../harness/server.ts";
import { median } from "./bench-row.ts";
import { autocannon, cpuMs } from "./processes.ts";

/**
 * `node --import tsx bench/ab-gateways.ts A_ROOT B_ROOT [RUNS=8] [chat|stream|models]`: an A/B of two checkouts of
 * Modelgate (a `git worktree` of the parent commit, say, with node_modules linked) under the same load: non-stream
 * or streamed chat through `engine: upstream` to the canned upstream, or authenticated GET /v1/models, c=16, 5-s autocannon
 * runs alternating A and B after a 10-s warm-up of each. Prints the CPU per request of each process (/proc) per run,
 * and B over A per run; the later runs are the steady state.
 */
const [aRoot, bRoot, runs = "8", what = "chat"] = process.argv.slice(2);
if (!aRoot || !bRoot) throw new Error("usage: ab-gateways.ts A_ROOT B_ROOT [RUNS] [chat|stream|models]");
const canned = await startCanned();
const sides: Record<"A" | "B", { pid: number; url: string; key: string; stop: () => Promise<void> }> = {} as never;
for (const [name, root] of [["A", aRoot], ["B", bRoot]] as const) {
  const dir = tempDir(`ab-${name}-`);
  const raw = {
    dataDir: dir,
    plans: { bench: { rateLimit: { requests: 100_000_000, window: "1m" } } },
    defaultPlan: "bench",
    models: [{ id: "canned", engine: "upstream", capabilities: ["chat"], upstreams: [{ url: `http://127.0.0.1:${canned.port}/v1`, model: "canned", maxInFlight: 256 }] }],
  };
  const gateway = await spawnServer(raw, dir, [], {}, path.resolve(root, "bin/modelgate.js"));
  const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
  sides[name] = { pid: gateway.child.pid!, url: `${gateway.origin}/v1/${what === "models" ? "models" : "chat/completions"}`, key, stop: async () => void (await gateway.stop()) };
}
const body = what === "models" ? undefined : JSON.stringify({ model: "canned", messages: [{ role: "user", content: "Hello" }], ...(what === "stream" ? { stream: true } : {}) });
const cpu = { A: [] as number[], B: [] as number[] };
try {
  for (const side of Object.values(sides)) await autocannon({ url: side.url, body, key: side.key, seconds: 10 });
  for (let i = 0; i < Number(runs); i++) {
    for (const name of i % 2 ? (["B", "A"] as const) : (["A", "B"] as const)) {
      const side = sides[name];
      const before = cpuMs(side.pid);
      const load = await autocannon({ url: side.url, body, key: side.key, seconds: 5 });
      if (load.failed > 0) throw new Error(`${name}: ${load.failed} failed requests`);
      cpu[name].push(((cpuMs(side.pid) - before) * 1000) / (load.rps * 5));
    }
  }
} finally {
  for (const side of Object.values(sides)) await side.stop();
  canned.child.kill();
}
for (const name of ["A", "B"] as const) console.log(`${name} CPU µs per request: ${cpu[name].map((v) => v.toFixed(0)).join(" ")} (median ${median(cpu[name]).toFixed(0)})`);
const ratios = cpu.B.map((b, i) => b / cpu.A[i]!);
console.log(`B over A per run: ${ratios.map((r) => r.toFixed(3)).join(" ")} (median ${median(ratios).toFixed(3)})`);
