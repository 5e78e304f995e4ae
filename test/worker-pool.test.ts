import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { execFileSync } from "node:child_process";
import { WorkerPool, WorkerCrashedError, WorkerTaskError, workerExecArgv, workerHeaps } from "../src/workers/worker-pool.ts";
import { AppError } from "../src/errors/app-error.ts";

const repo = path.resolve(import.meta.dirname, "..");
const appErrorUrl = pathToFileURL(path.join(repo, "src/errors/app-error.ts")).href;
let dir: string;
let taskModule: string;

// A task module written as TypeScript, so the test also proves workers load .ts through tsx.
const taskSource = `
import { threadId } from "node:worker_threads";
import { AppError } from ${JSON.stringify(appErrorUrl)};
let initArg: unknown = null;
export function init(arg: { fail?: boolean; tag: string }): void {
  if (arg.fail) throw new Error("init refused: " + arg.tag);
  initArg = arg;
}
export async function echo(args: { value: unknown }): Promise<{ value: unknown; init: unknown; thread: number }> {
  return { value: args.value, init: initArg, thread: threadId };
}
export async function sleep(args: { ms: number }, ctx: { signal: AbortSignal }): Promise<string> {
  const end = Date.now() + args.ms;
  while (Date.now() < end) {
    if (ctx.signal.aborted) return "stopped";
    await new Promise((r) => setTimeout(r, 5));
  }
  return "slept";
}
export async function fail(args: { app: boolean }): Promise<never> {
  if (args.app) throw new AppError("invalid_parameter", { param: "input[2]", message: "input[2] is too long" });
  const err = new Error("plain failure") as Error & { code: string };
  err.code = "E_PLAIN";
  throw err;
}
export async function crash(): Promise<never> {
  setTimeout(() => process.exit(3), 10);
  return new Promise(() => {});
}
export async function count(args: { n: number }, ctx: { emit(v: unknown): void; signal: AbortSignal }): Promise<number> {
  for (let i = 0; i < args.n && !ctx.signal.aborted; i++) {
    ctx.emit(i);
    await new Promise((r) => setTimeout(r, 2));
  }
  return args.n;
}
export async function sum(args: { data: Float32Array }): Promise<number> {
  return args.data.reduce((a, b) => a + b, 0);
}
`;

before(() => {
  dir = mkdtempSync(path.join(tmpdir(), "worker-pool-test-"));
  taskModule = path.join(dir, "fixture.task.ts");
  writeFileSync(path.join(dir, "package.json"), '{"type":"module"}');
  writeFileSync(taskModule, taskSource);
});
after(() => rmSync(dir, { recursive: true, force: true }));

test("worker pool: init runs once per worker, calls reach exported functions, work spreads to the least busy worker", async () => {
  const pool = new WorkerPool({ size: 2, taskModule, init: { tag: "A" } });
  await pool.start();
  try {
    const r = await pool.call<{ value: unknown; init: { tag: string } }>("echo", { value: [1, "two"] });
    assert.deepEqual(r.value, [1, "two"]);
    assert.equal(r.init.tag, "A");
    const slow = pool.call<string>("sleep", { ms: 1500 });
    slow.catch(() => {}); // awaited below; keeps a failed assertion from surfacing as an unhandled rejection
    const other = await pool.call<{ thread: number }>("echo", { value: 0 });
    const again = await pool.call<{ thread: number }>("echo", { value: 0 });
    assert.equal(other.thread, again.thread, "while one worker is busy, calls go to the idle one");
    assert.deepEqual(pool.load().sort(), [0, 1]);
    assert.equal(await slow, "slept");
    const data = new Float32Array([1, 2, 3.5]);
    assert.equal(await pool.call<number>("sum", { data }, { transfer: [data.buffer] }), 6.5);
    await assert.rejects(pool.call("nope", {}), /no function 'nope'/);
  } finally {
    await pool.close();
  }
});

test("worker pool: the live workers' V8 heaps are summed for the metrics, and a closed pool's leave the sum", async (t) => {
  // The pool's workers are unref'd and a heap reading is no handle either: a server's sockets keep its loop alive.
  const keepAlive = setInterval(() => {}, 1000);
  t.after(() => clearInterval(keepAlive));
  const before = await workerHeaps();
  const pool = new WorkerPool({ size: 2, taskModule, init: { tag: "H" } });
  await pool.start();
  let during: Awaited<ReturnType<typeof workerHeaps>>;
  try {
    await pool.call("echo", { value: 1 });
    during = await workerHeaps();
  } finally {
    await pool.close();
  }
  assert.equal(during.workers - before.workers, 2);
  // A worker's heap is a few MB at least (its isolate and the task module), used below total.
  assert.ok(during.total - before.total > 1_000_000, `${during.total - before.total} bytes`);
  assert.ok(during.used > 0 && during.used <= during.total);
  assert.equal((await workerHeaps()).workers, before.workers);
});

test("worker pool: an AppError thrown in a worker is rethrown as AppError with code and param", async () => {
  const pool = new WorkerPool({ size: 1, taskModule, init: { tag: "B" } });
  await pool.start();
  try {
    const err = await pool.call("fail", { app: true }).catch((e: unknown) => e);
    assert.ok(err instanceof AppError);
    assert.equal(err.code, "invalid_parameter");
    assert.equal(err.param, "input[2]");
    assert.equal(err.message, "input[2] is too long");
    assert.equal(err.status, 400);
    const plain = await pool.call("fail", { app: false }).catch((e: unknown) => e);
    assert.ok(plain instanceof WorkerTaskError);
    assert.equal(plain.message, "plain failure");
    assert.equal(plain.code, "E_PLAIN");
  } finally {
    await pool.close();
  }
});

test("worker pool: an aborted signal rejects the call at once and the worker is told to stop", async () => {
  const pool = new WorkerPool({ size: 1, taskModule, init: { tag: "C" } });
  await pool.start();
  try {
    const ac = new AbortController();
    const started = Date.now();
    const p = pool.call("sleep", { ms: 5000 }, { signal: ac.signal });
    setTimeout(() => ac.abort(new Error("client went away")), 50);
    await assert.rejects(p, /client went away/);
    assert.ok(Date.now() - started < 1000);
    // The worker saw the abort and finished early, so the pool is free again soon.
    const deadline = Date.now() + 2000;
    while (pool.load()[0] !== 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(pool.load(), [0]);
    const pre = new AbortController();
    pre.abort(new Error("already"));
    await assert.rejects(pool.call("echo", { value: 1 }, { signal: pre.signal }), /already/);
    assert.deepEqual(pool.load(), [0]);
  } finally {
    await pool.close();
  }
});

test("worker pool: a crashed worker rejects its in-flight calls and is replaced", async () => {
  const pool = new WorkerPool({ size: 1, taskModule, init: { tag: "D" } });
  await pool.start();
  try {
    const before = await pool.call<{ thread: number }>("echo", { value: 1 });
    const inflight = pool.call("sleep", { ms: 2000 });
    const err = await pool.call("crash", {}).catch((e: unknown) => e);
    assert.ok(err instanceof WorkerCrashedError, String(err));
    await assert.rejects(inflight, WorkerCrashedError);
    const afterCrash = await pool.call<{ thread: number; init: { tag: string } }>("echo", { value: 2 });
    assert.notEqual(afterCrash.thread, before.thread);
    assert.equal(afterCrash.init.tag, "D", "the new worker ran init again");
  } finally {
    await pool.close();
  }
});

test("worker pool: streamed events arrive in order; a failing init rejects start", async () => {
  const pool = new WorkerPool({ size: 1, taskModule, init: { tag: "E" } });
  await pool.start();
  try {
    const got: number[] = [];
    for await (const v of pool.stream<number>("count", { n: 5 })) got.push(v);
    assert.deepEqual(got, [0, 1, 2, 3, 4]);
    // Leaving the loop early stops the task and frees the worker.
    for await (const v of pool.stream<number>("count", { n: 1000 })) if (v === 2) break;
    const deadline = Date.now() + 2000;
    while (pool.load()[0] !== 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assert.deepEqual(pool.load(), [0]);
  } finally {
    await pool.close();
  }
  const bad = new WorkerPool({ size: 1, taskModule, init: { tag: "F", fail: true } });
  await assert.rejects(bad.start(), /init refused: F/);
});

test("worker pool: workers load .ts when the parent registered tsx programmatically (bin/modelgate.js style)", () => {
  assert.deepEqual(workerExecArgv(["--import", "tsx", "--test", "--enable-source-maps"]), ["--enable-source-maps"]);
  assert.deepEqual(workerExecArgv(["--import=tsx", "--conditions=dev", "--test-reporter=spec"]), ["--conditions", "dev"]);
  const script = path.join(dir, "programmatic.mjs");
  writeFileSync(
    script,
    `import { register } from ${JSON.stringify(pathToFileURL(path.join(repo, "node_modules/tsx/dist/esm/api/index.mjs")).href)};
register();
const { WorkerPool } = await import(${JSON.stringify(pathToFileURL(path.join(repo, "src/workers/worker-pool.ts")).href)});
const pool = new WorkerPool({ size: 1, taskModule: ${JSON.stringify(taskModule)}, init: { tag: "G" } });
await pool.start();
const r = await pool.call("echo", { value: "ok" });
await pool.close();
console.log(JSON.stringify(r.value) + " " + r.init.tag);
`,
  );
  const out = execFileSync(process.execPath, [script], { cwd: dir, encoding: "utf8", timeout: 60_000 });
  assert.equal(out.trim(), '"ok" G');
});
