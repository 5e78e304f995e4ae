// Issue 47: the soak's leak readings are taken just after a full GC forced through each replica's inspector.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import path from "node:path";
import { createInterface } from "node:readline";
import { afterFullGc, FullGcCollector, inspectFlag, inspectorUrl } from "../harness/full-gc.ts";

const mb = 1024 * 1024;

/**
 * Runs `script` in a process with an inspector, waits for the first line it prints (its memory before), and gives
 * `check` that line and a full GC taken then; the process is killed after.
 */
async function afterScript(script: string, check: (before: NodeJS.MemoryUsage, reading: Awaited<ReturnType<typeof afterFullGc>>) => void, trimWaitMs?: number): Promise<void> {
  const child = spawn(process.execPath, [inspectFlag, "-e", script], { stdio: ["ignore", "pipe", "pipe"] });
  const stderr: string[] = [];
  child.stderr.setEncoding("utf8").on("data", (d: string) => stderr.push(d));
  try {
    const [line] = (await once(child.stdout.setEncoding("utf8"), "data")) as [string];
    check(JSON.parse(line) as NodeJS.MemoryUsage, await afterFullGc(inspectorUrl(stderr), child.pid!, 10_000, trimWaitMs));
  } finally {
    child.kill();
  }
}

test("issue 47 afterFullGc: a full GC forced through the inspector leaves what is held and frees the garbage", async () => {
  // 40 MB held, and 32 MB let go once it has reached the old generation: garbage no minor GC takes.
  const script = `
    globalThis.held = Array.from({ length: 5 }, () => new Array(1024 * 1024).fill(0.5));
    let dropped = Array.from({ length: 4 }, () => new Array(1024 * 1024).fill(0.25));
    setTimeout(() => { dropped = null; }, 300);
    setTimeout(() => console.log(JSON.stringify(process.memoryUsage())), 800);
    setInterval(() => {}, 1000);`;
  await afterScript(script, (before, reading) => {
    assert.ok(reading.heap >= 40 * mb && reading.heap < 40 * mb + 12 * mb, `heap after the full GC ${(reading.heap / mb).toFixed(1)} MB holds the 40 MB and little else`);
    assert.ok(reading.heap < before.heapUsed, `the garbage went: ${(before.heapUsed / mb).toFixed(1)} MB before`);
    assert.ok(reading.rss > reading.heap, "RSS is read from the process");
  });
});

test("issue 47 afterFullGc: the worker threads collect too, and the native buffers their garbage held go back", async () => {
  // A worker fills 64 MB of ArrayBuffers (outside V8's heap) and drops them, then allocates nothing more: no GC of
  // its own would come, and the main thread's does not reach a worker's isolate.
  const worker = `
    let dropped = Array.from({ length: 8 }, () => new Uint8Array(8 * 1024 * 1024).fill(7));
    setTimeout(() => { dropped = null; require("node:worker_threads").parentPort.postMessage("dropped"); }, 300);
    setInterval(() => {}, 1000);`;
  const script = `
    const { Worker } = require("node:worker_threads");
    new Worker(${JSON.stringify(worker)}, { eval: true }).once("message", () =>
      setTimeout(() => console.log(JSON.stringify(process.memoryUsage())), 200));
    setInterval(() => {}, 1000);`;
  await afterScript(
    script,
    (before, reading) => assert.ok(before.rss - reading.rss > 48 * mb, `RSS ${(before.rss / mb).toFixed(1)} → ${(reading.rss / mb).toFixed(1)} MB: the worker's 64 MB went`),
    200,
  );
});

test("issue 47 afterFullGc: a process without an inspector is an error that says how to start it", () => {
  assert.throws(() => inspectorUrl(["listening https://127.0.0.1:1\n"]), /--inspect=127\.0\.0\.1:0/);
});

test("issue 47 FullGcCollector: collections through one connection leave no inspector sessions behind in the worker threads", async () => {
  // glibc's allocated bytes (mallinfo2: its arenas' blocks in use and its mmapped ones), printed for each stdin line.
  const script = `
    const { Worker } = require("node:worker_threads");
    for (let i = 0; i < 2; i++) new Worker("setInterval(() => {}, 1000)", { eval: true });
    const koffi = require("koffi");
    const info = koffi.struct("mallinfo2", Object.fromEntries(["arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost"].map((f) => [f, "size_t"])));
    const mallinfo2 = koffi.load("libc.so.6").func("mallinfo2", info, []);
    require("node:readline").createInterface({ input: process.stdin }).on("line", () => {
      const m = mallinfo2();
      console.log(Number(m.uordblks) + Number(m.hblkhd));
    });
    setTimeout(() => console.log("ready"), 300);`;
  const child = spawn(process.execPath, [inspectFlag, "-e", script], { stdio: ["pipe", "pipe", "pipe"], cwd: path.resolve(import.meta.dirname, "..") });
  const stderr: string[] = [];
  child.stderr.setEncoding("utf8").on("data", (d: string) => stderr.push(d));
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const allocated = async () => {
    child.stdin.write("\n");
    return Number((await lines.next()).value);
  };
  try {
    assert.equal((await lines.next()).value, "ready");
    const collector = await FullGcCollector.connect(inspectorUrl(stderr), child.pid!);
    try {
      for (let i = 0; i < 5; i++) await collector.collect(0);
      const before = await allocated();
      for (let i = 0; i < 60; i++) await collector.collect(0);
      const grown = (await allocated()) - before;
      // A connection per collection (NodeWorker.enable each time) leaves a session in each worker: about 0.9 MB here.
      assert.ok(grown < 256 * 1024, `60 collections grew the process's malloc'd memory by ${(grown / 1024).toFixed(0)} KB`);
    } finally {
      collector.close();
    }
  } finally {
    child.kill();
  }
});
