#!/usr/bin/env node
// `npm test`: every test/*.test.ts (or the files named as arguments) through Node's test runner, in two phases.
// First every file not marked to run alone, several at once (MODELGATE_TEST_CONCURRENCY, default 6); then each file
// marked `// test: alone (why)` near its top, one at a time with nothing else running. A file is marked when what it
// asserts depends on the machine's spare CPU (a time budget, a throughput floor), not on another file's data: every
// file gets its own port, temp dir, database and Redis keys from the harness. Files marked `// test: long (why)` start
// first in their phase, so that the last minutes are not one long file running after all the short ones have ended.
// Every node process of the run (test files, the servers and CLIs they spawn) keeps V8's compiled code in Node's
// compile cache, .cache/node-compile: each starts by compiling hundreds of modules, and the cache takes about an eighth off
// that CPU. The servers and CLIs the tests spawn run from dist/ (harness/server.ts's cliPath), so dist/ is built first
// when a file under src/ changed after it. Ends with one line of totals.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { buildDist, distIsFresh } from "../harness/dist-freshness.mjs";

const root = path.resolve(import.meta.dirname, "..");
const aloneMark = /^\/\/ test: alone\b/m;
const longMark = /^\/\/ test: long\b/m;
const concurrency = Number(process.env.MODELGATE_TEST_CONCURRENCY ?? 6);
if (!Number.isInteger(concurrency) || concurrency < 1) throw new Error(`MODELGATE_TEST_CONCURRENCY must be a whole number ≥ 1, not ${process.env.MODELGATE_TEST_CONCURRENCY}`);

const files = process.argv.length > 2
  ? process.argv.slice(2)
  : readdirSync(path.join(root, "test")).filter((f) => f.endsWith(".test.ts")).sort().map((f) => `test/${f}`);
const heads = new Map(files.map((f) => [f, readFileSync(path.resolve(root, f), "utf8").slice(0, 4000)]));
const longFirst = (group) => [...group.filter((f) => longMark.test(heads.get(f))), ...group.filter((f) => !longMark.test(heads.get(f)))];
const alone = longFirst(files.filter((f) => aloneMark.test(heads.get(f))));
const together = longFirst(files.filter((f) => !alone.includes(f)));

const times = path.join(root, ".cache/test-times");
rmSync(times, { recursive: true, force: true });
mkdirSync(times, { recursive: true });
const reporter = process.stdout.isTTY ? "spec" : "tap"; // node's own default
const totals = { pass: 0, fail: 0, cancelled: 0, skipped: 0, todo: 0 };
let failed = false;
let current = null;
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => (current ? current.kill(signal) : process.exit(130)));

/** One phase: scripts/run-test-files.mjs over `group`; its output passes through, and its closing counts are added to the totals. */
function phase(name, group, jobs) {
  if (group.length === 0) return Promise.resolve();
  console.log(`\n# ${name}: ${group.length} files, ${jobs} at a time`);
  const started = Date.now();
  const args = ["--import", "tsx", path.join(root, "scripts/run-test-files.mjs"), reporter, String(jobs), path.join(times, `${name}.jsonl`)];
  return new Promise((resolve) => {
    const env = { NODE_COMPILE_CACHE: path.join(root, ".cache/node-compile"), ...process.env };
    current = spawn(process.execPath, [...args, ...group], { cwd: root, env, stdio: ["ignore", "pipe", "inherit"] });
    let tail = "";
    current.stdout.on("data", (chunk) => {
      process.stdout.write(chunk);
      tail = (tail + chunk.toString("utf8")).slice(-4000);
    });
    current.on("close", (code, signal) => {
      current = null;
      // The closing counts: the last of each in the output (spec prints `ℹ pass 3`, TAP `# pass 3`).
      const counts = {};
      for (const line of tail.replace(/\x1b\[[0-9;]*m/g, "").split("\n")) {
        const count = /^(?:#|ℹ) (pass|fail|cancelled|skipped|todo) (\d+)$/.exec(line.trim());
        if (count) counts[count[1]] = Number(count[2]);
      }
      for (const [what, n] of Object.entries(counts)) totals[what] += n;
      if (code !== 0) failed = true;
      console.log(`# ${name}: ${code === 0 ? "ok" : `exit ${code ?? signal}`} in ${((Date.now() - started) / 1000).toFixed(0)} s`);
      resolve();
    });
  });
}

if (!distIsFresh(root)) {
  const started = Date.now();
  buildDist(root);
  console.log(`# built dist/ (the sources changed after it) in ${((Date.now() - started) / 1000).toFixed(0)} s`);
}
await phase("together", together, concurrency);
await phase("alone", alone, 1);
const slowest = ["together", "alone"]
  .filter((name) => existsSync(path.join(times, `${name}.jsonl`)))
  .flatMap((name) => readFileSync(path.join(times, `${name}.jsonl`), "utf8").trim().split("\n").filter(Boolean).map((l) => ({ ...JSON.parse(l), name })))
  .sort((a, b) => b.seconds - a.seconds)
  .slice(0, 10);
console.log(`# slowest files (seconds of their tests): ${slowest.map((t) => `${path.relative(root, t.file)} ${t.seconds}${t.name === "alone" ? " (alone)" : ""}`).join(", ")}`);
const failures = totals.fail + totals.cancelled;
console.log(`tests: ${totals.pass} passed, ${failures} failed, ${totals.skipped + totals.todo} skipped`);
process.exitCode = failed || failures > 0 ? 1 : 0;
