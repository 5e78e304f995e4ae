import { readFileSync } from "node:fs";
import path from "node:path";
import { startCanned } from "../harness/peers.ts";
import { tempDir } from "../harness/server.ts";
import { startCannedGateway } from "./floor-sides.ts";
import { autocannon } from "./processes.ts";

/**
 * `node --import tsx bench/async-resources.ts [ROOT] [--load=chat|stream|models] [--sites=promise|other]
 * [--depth=2] [--top=40] [--skip-node]`: the async resources (promises, ticks, timers, wraps) Modelgate's compiled
 * build from checkout ROOT (default: this one, `npm run build` first) creates per request under a gateway bench's
 * load (c=16, 3 s warm, 3 s counted), by type, or by type and call site with `--sites`. A diagnostic, not a
 * measurement of time: async_hooks slow the process down. It shows the per-request steps a CPU profile spreads thin
 * (a counting stream per body, a timer re-made per event, a promise per read).
 */
const args = process.argv.slice(2);
const option = (name: string, fallback: string) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const root = path.resolve(args.find((a) => !a.startsWith("--")) ?? ".");
const load = option("load", "chat");
const countsFile = path.join(tempDir("async-resources-"), "counts.json");
const canned = await startCanned();
const { gateway, key } = await startCannedGateway(canned.port, path.join(root, "dist/cli/run.js"), {
  NODE_OPTIONS: `--import ${path.resolve(import.meta.dirname, "peers/async-resources-hook.mjs")}`,
  ASYNC_COUNTS_FILE: countsFile,
  ASYNC_SITES: option("sites", ""),
  ASYNC_DEPTH: option("depth", "2"),
  ASYNC_SKIP_NODE: args.includes("--skip-node") ? "1" : "0",
});
try {
  const body = load === "models" ? undefined : JSON.stringify({ model: "canned", messages: [{ role: "user", content: "Hello" }], ...(load === "stream" ? { stream: true } : {}) });
  const url = gateway.origin + (load === "models" ? "/v1/models" : "/v1/chat/completions");
  await autocannon({ url, body, key, seconds: 3 });
  const seconds = 3;
  process.kill(gateway.child.pid!, "SIGUSR2");
  const { rps } = await autocannon({ url, body, key, seconds });
  process.kill(gateway.child.pid!, "SIGUSR2");
  await new Promise((r) => setTimeout(r, 500));
  const counts = JSON.parse(readFileSync(countsFile, "utf8")) as [string, number][];
  const requests = rps * seconds;
  console.log(`${Math.round(requests)} requests; async resources per request: ${(counts.reduce((n, [, c]) => n + c, 0) / requests).toFixed(1)}`);
  for (const [site, count] of counts.slice(0, Number(option("top", "40")))) console.log((count / requests).toFixed(2).padStart(7), site);
} finally {
  await gateway.stop();
  canned.child.kill();
}
