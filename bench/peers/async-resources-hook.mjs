// Loaded into a gateway with `--import` by bench/async-resources.ts: counts the async resources (promises, ticks,
// timers, stream and socket wraps) the process creates between two SIGUSR2s, by type, or by type and the call site
// that made them (ASYNC_SITES=promise: promises only; other: everything but promises), and writes the counts to
// ASYNC_COUNTS_FILE as JSON at the second signal.
import { createHook } from "node:async_hooks";
import { writeFileSync } from "node:fs";

const sites = process.env.ASYNC_SITES ?? "";
const depth = Number(process.env.ASYNC_DEPTH ?? 2);
const skipNode = process.env.ASYNC_SKIP_NODE === "1";
const counts = new Map();
let counting = false;

function siteOf(type) {
  if (!sites || (type === "PROMISE") !== (sites === "promise")) return type;
  const trace = {};
  Error.captureStackTrace(trace);
  const frames = trace.stack
    .split("\n")
    .slice(2)
    .filter((line) => !line.includes("node:internal/async_hooks") && !line.includes("async-resources-hook") && !(skipNode && line.includes("(node:")));
  return `${type}: ${frames.slice(0, depth).map((line) => line.trim().replace(/^at /, "").replace(/\(.*\/(dist|node_modules)\//, "($1/")).join(" < ")}`;
}

createHook({
  init(_id, type) {
    if (!counting) return;
    const site = siteOf(type);
    counts.set(site, (counts.get(site) ?? 0) + 1);
  },
}).enable();

process.on("SIGUSR2", () => {
  if (!counting) {
    counts.clear();
    counting = true;
    return;
  }
  counting = false;
  writeFileSync(process.env.ASYNC_COUNTS_FILE, JSON.stringify([...counts].sort((a, b) => b[1] - a[1])));
});
