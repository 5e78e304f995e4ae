import { execFileSync } from "node:child_process";
import path from "node:path";
import { startCanned } from "../harness/peers.ts";
import { median } from "./bench-row.ts";
import { startCannedGateway, startFloorPeer, type CannedGateway } from "./floor-sides.ts";
import { loadWithCpu } from "./processes.ts";

/**
 * `node --import tsx bench/ab-gateways.ts [--floor] ROOT... [--runs=8] [--load=chat|stream|models]`: Modelgate from
 * each checkout ROOT (a `git worktree` or `git archive` of another commit, say, with node_modules linked), each
 * compiled first and run as deployed (the compiled build), under the same load: non-stream or streamed chat through
 * `engine: upstream` to the canned upstream, or authenticated GET /v1/models, c=16. 5-s autocannon runs go round the
 * arms in a rotating order after a 30-s warm-up of each (V8 is still optimising Modelgate's path 16–24 s in).
 * `--floor` adds the floor of the stack (bench/peers/fastify-floor.mjs in its `sse` mode) as an arm. Prints each
 * arm's CPU per request (/proc) per run, and each arm over the first per run; the later runs are the steady state.
 */
const args = process.argv.slice(2);
const option = (name: string, fallback: string) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const runs = Number(option("runs", "8"));
const what = option("load", "chat");
const roots = args.filter((a) => !a.startsWith("--"));
if (roots.length === 0) throw new Error("usage: ab-gateways.ts [--floor] ROOT... [--runs=N] [--load=chat|stream|models]");

interface Arm {
  name: string;
  pid: number;
  url: string;
  key?: string;
  stop: () => Promise<void>;
}
const canned = await startCanned();
const arms: Arm[] = [];
const urlPath = what === "models" ? "/v1/models" : "/v1/chat/completions";
let firstGateway: CannedGateway | null = null;
for (const [i, root] of roots.entries()) {
  execFileSync(process.execPath, [path.join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json"], { cwd: root, stdio: "inherit" });
  const started = await startCannedGateway(canned.port, path.resolve(root, "dist/cli/run.js"));
  firstGateway ??= started;
  const { gateway, key } = started;
  arms.push({ name: `${i}:${path.basename(path.resolve(root))}`, pid: gateway.child.pid!, url: gateway.origin + urlPath, key, stop: async () => void (await gateway.stop()) });
}
if (args.includes("--floor")) {
  const floor = await startFloorPeer(canned.port, firstGateway!);
  arms.push({ name: "floor", pid: floor.child.pid!, url: `https://127.0.0.1:${floor.port}${urlPath}`, stop: async () => void floor.child.kill() });
}
const body = what === "models" ? undefined : JSON.stringify({ model: "canned", messages: [{ role: "user", content: "Hello" }], ...(what === "stream" ? { stream: true } : {}) });
const cpu = new Map(arms.map((a) => [a.name, [] as number[]]));
const measure = async (arm: Arm, seconds: number) => (await loadWithCpu(arm.pid, { url: arm.url, body, key: arm.key, seconds }, arm.name)).cpuUs;
try {
  for (const arm of arms) await measure(arm, 30);
  for (let i = 0; i < runs; i++) {
    const order = arms.map((_, j) => arms[(i + j) % arms.length]!);
    for (const arm of order) cpu.get(arm.name)!.push(await measure(arm, 5));
    process.stderr.write(`  run ${i + 1}/${runs}\n`);
  }
} finally {
  for (const arm of arms) await arm.stop();
  canned.child.kill();
}
const first = cpu.get(arms[0]!.name)!;
for (const arm of arms) {
  const own = cpu.get(arm.name)!;
  const ratios = own.map((v, i) => v / first[i]!);
  console.log(`${arm.name} CPU µs per request: ${own.map((v) => v.toFixed(0)).join(" ")} (median ${median(own).toFixed(0)}); over ${arms[0]!.name}: median ${median(ratios).toFixed(3)} (${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)})`);
}
