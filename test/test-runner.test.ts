import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { tempDir } from "../harness/server.ts";

const root = path.resolve(import.meta.dirname, "..");
const fixture = (name: string) => `test/fixtures/runner/${name}.ts`;

/** One phase of `npm test` (scripts/run-test-files.mjs) over `files`, one at a time: what started in which order, the times, the exit. */
function runPhase(files: string[]) {
  const dir = tempDir();
  const order = path.join(dir, "order");
  const times = path.join(dir, "times.jsonl");
  const run = spawnSync(process.execPath, ["--import", "tsx", "scripts/run-test-files.mjs", "tap", "1", times, ...files.map(fixture)], {
    cwd: root,
    encoding: "utf8",
    // Not as a test of this file's runner: NODE_TEST_CONTEXT would make the phase report to it.
    env: { ...process.env, NODE_TEST_CONTEXT: undefined, RUNNER_ORDER: order },
  });
  const started = readFileSync(order, "utf8").trim().split("\n");
  const timed = readFileSync(times, "utf8").trim().split("\n").map((line) => path.basename(JSON.parse(line).file, ".ts"));
  return { status: run.status, stdout: run.stdout, started, timed };
}

// `node --test` sorts its files by name, so the files marked `// test: long` that scripts/test.mjs put first started
// in alphabetical order among the rest (2026-12-02: upstream-failover ran on alone at the end of the first phase).
test("npm test's phase runs its files in the order given, not by name, and reports each file's time", () => {
  const phase = runPhase(["z-named-last", "a-named-first"]);
  assert.equal(phase.status, 0, phase.stdout);
  assert.deepEqual(phase.started, ["z-named-last", "a-named-first"]);
  assert.deepEqual(phase.timed.sort(), ["a-named-first", "z-named-last"]);
  assert.match(phase.stdout, /^# pass 2$/m);
});

test("npm test's phase fails when a file's test fails, and still runs the rest", () => {
  const phase = runPhase(["m-fails", "a-named-first"]);
  assert.equal(phase.status, 1, phase.stdout);
  assert.deepEqual(phase.started, ["m-fails", "a-named-first"]);
  assert.match(phase.stdout, /^# fail 1$/m);
  assert.match(phase.stdout, /^# pass 1$/m);
});
