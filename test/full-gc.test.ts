// Issue 47: the soak's leak readings are taken just after a full GC forced through each replica's inspector.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { afterFullGc, inspectFlag, inspectorUrl } from "../harness/full-gc.ts";

const mb = 1024 * 1024;

test("issue 47 afterFullGc: a full GC forced through the inspector leaves what is held and frees the garbage", async () => {
  // 40 MB held, and 32 MB let go once it has reached the old generation: garbage no minor GC takes.
  const script = `
    globalThis.held = Array.from({ length: 5 }, () => new Array(1024 * 1024).fill(0.5));
    let dropped = Array.from({ length: 4 }, () => new Array(1024 * 1024).fill(0.25));
    setTimeout(() => { dropped = null; }, 300);
    setTimeout(() => console.log(JSON.stringify(process.memoryUsage())), 800);
    setInterval(() => {}, 1000);`;
  const child = spawn(process.execPath, [inspectFlag, "-e", script], { stdio: ["ignore", "pipe", "pipe"] });
  const stderr: string[] = [];
  child.stderr.setEncoding("utf8").on("data", (d: string) => stderr.push(d));
  try {
    const [line] = (await once(child.stdout.setEncoding("utf8"), "data")) as [string];
    const before = JSON.parse(line) as { heapUsed: number };
    const reading = await afterFullGc(inspectorUrl(stderr), child.pid!);
    assert.ok(reading.heap >= 40 * mb && reading.heap < 40 * mb + 12 * mb, `heap after the full GC ${(reading.heap / mb).toFixed(1)} MB holds the 40 MB and little else`);
    assert.ok(reading.heap < before.heapUsed, `the garbage went: ${(before.heapUsed / mb).toFixed(1)} MB before`);
    assert.ok(reading.rss > reading.heap, "RSS is read from the process");
  } finally {
    child.kill();
  }
});

test("issue 47 afterFullGc: a process without an inspector is an error that says how to start it", () => {
  assert.throws(() => inspectorUrl(["listening https://127.0.0.1:1\n"]), /--inspect=127\.0\.0\.1:0/);
});
