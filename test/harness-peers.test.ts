import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

const fixture = path.join(import.meta.dirname, "fixtures/peers/killed-parent.ts");

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

// A peer that outlived its killed test file held the runner's stderr open, and `npm test` waited for it forever
// (CI, 2026-12-01: test/claude-code.test.ts timed out and its canned upstream stayed).
test("a peer the harness started ends when the process that started it is killed", async () => {
  const run = spawnSync(process.execPath, ["--import", "tsx", fixture], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
  assert.equal(run.signal, "SIGKILL");
  const pid = Number(run.stdout.trim());
  assert.ok(pid > 0, run.stdout);
  for (let i = 0; i < 50 && alive(pid); i++) await sleep(100);
  const left = alive(pid);
  if (left) process.kill(pid, "SIGKILL");
  assert.equal(left, false, `the peer (pid ${pid}) outlived its parent`);
});
