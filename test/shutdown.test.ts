// test: long (37 s alone, 17 s of it CPU)
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { closeSync, constants, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import YAML from "yaml";
import { testConfig } from "../harness/config.ts";
import { cliPath, modelsDir, requester, spawnServer, tempDir, trustingFetch } from "../harness/server.ts";
import { createKey } from "../harness/keys.ts";
import { sseFrames } from "./helpers/sse.ts";
import { until } from "./helpers/wait-for.ts";

test("issue 3.12 SIGTERM stops accepting, drains an in-flight stream to [DONE], then exits 0 without waiting for the client's keep-alive to lapse", async () => {
  const dir = tempDir();
  const raw = {
    dataDir: path.join(dir, "data"),
    // Room for the whole stream to drain: on a loaded machine its 1,500 tokens have taken more than 30 s.
    server: { shutdownTimeout: "120s" },
    models: [{ id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 2048, parallel: 1, threads: 1 }],
  };
  const server = await spawnServer(raw, dir);
  const { key } = await createKey(testConfig(raw, path.join(dir, "c.yaml")), {});
  const { fetch } = trustingFetch(readFileSync(path.join(dir, "data/tls/cert.pem"), "utf8"));
  const res = await requester(fetch, server.origin).post(
    "/v1/chat/completions",
    { model: "stories", stream: true, max_tokens: 1500, temperature: 1, seed: 1, messages: [{ role: "user", content: "Once upon a time" }] },
    { key },
  );
  assert.equal(res.status, 200);
  const frames = sseFrames(res);
  assert.ok(!(await frames.next()).done, "the stream has begun");
  const exited = server.stop("SIGTERM");
  const ca = readFileSync(path.join(dir, "data/tls/cert.pem"), "utf8");
  const freshConnection = async () => {
    const fresh = trustingFetch(ca);
    try {
      await (await fresh.fetch(`${server.origin}/healthz`)).arrayBuffer();
    } finally {
      await fresh.agent.close();
    }
  };
  await until(() => freshConnection().then(() => false, () => true), "the listener to close", 5000);
  await assert.rejects(freshConnection(), "no new connections while draining");
  let last: unknown = null;
  for await (const frame of frames) last = frame;
  assert.equal(last, "[DONE]", "the stream in flight finished normally");
  // The client keeps its connection: the server closes it once the stream has ended (it used to wait ~72 s).
  const drained = Date.now();
  assert.equal(await exited, 0);
  assert.ok(Date.now() - drained < 10_000, `exited ${Date.now() - drained} ms after the stream ended`);
});

/** Polls until the process `pid` is gone; resolves with how long that took, or null after `ms`. */
async function goneWithin(pid: number, ms: number): Promise<number | null> {
  const started = Date.now();
  while (Date.now() - started < ms) {
    try {
      process.kill(pid, 0);
    } catch {
      return Date.now() - started;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return null;
}

/** A server with nothing to load, so it starts and stops fast; shutdownTimeout 1 s. */
function quickServerConfig(dir: string): string {
  const file = path.join(dir, "quick.yaml");
  writeFileSync(file, YAML.stringify({ dataDir: path.join(dir, "data"), server: { shutdownTimeout: "1s" }, models: [] }));
  return file;
}

// The repro of issue 29.9: a parent that starts `serve` detached with stdout and stderr piped, waits for
// "listening", sends SIGTERM to its process group and exits at once, so the log's reader is gone mid-shutdown.
const detachedParent = `
import { spawn } from "node:child_process";
const [cli, config] = process.argv.slice(2);
const child = spawn(process.execPath, [cli, "serve", "--config", config, "--port", "0"], { detached: true, stdio: ["ignore", "pipe", "pipe"] });
let out = "";
child.stderr.resume();
child.stdout.on("data", (d) => {
  out += d;
  if (!/listening/.test(out)) return;
  process.kill(-child.pid, "SIGTERM");
  process.stdout.write(String(child.pid), () => process.exit(0));
});
`;

test("issue 29.9 SIGTERM ends the process within shutdownTimeout + 5 s when the log's reader has gone (detached, piped, parent exits at once; 3 of 3)", async () => {
  const dir = tempDir();
  const config = quickServerConfig(dir);
  const parent = path.join(dir, "parent.mjs");
  writeFileSync(parent, detachedParent);
  for (let i = 0; i < 3; i++) {
    const { stdout } = await promisify(execFile)(process.execPath, [parent, cliPath, config]);
    const pid = Number(stdout);
    assert.ok(pid > 0, `the parent reported the server's pid: ${stdout}`);
    const took = await goneWithin(pid, 6000);
    if (took === null) process.kill(pid, "SIGKILL");
    assert.notEqual(took, null, `run ${i + 1}: the server was still running 6 s after SIGTERM`);
  }
});

test("issue 29.9 SIGTERM ends the process within shutdownTimeout + 5 s while stderr is a full pipe nobody reads", async () => {
  const dir = tempDir();
  const config = quickServerConfig(dir);
  // A FIFO whose read end this test holds open and never reads: the server's log writes fill it, then get EAGAIN.
  const fifo = path.join(dir, "stderr.fifo");
  await promisify(execFile)("mkfifo", [fifo]);
  const readEnd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  const writeEnd = openSync(fifo, constants.O_WRONLY);
  const child = spawn(process.execPath, [cliPath, "serve", "--config", config, "--port", "0"], { stdio: ["ignore", "pipe", writeEnd] });
  closeSync(writeEnd);
  try {
    const origin = await new Promise<string>((resolve, reject) => {
      let out = "";
      child.stdout!.setEncoding("utf8").on("data", (d: string) => {
        out += d;
        const match = /listening (https:\/\/\S+)/.exec(out);
        if (match) resolve(match[1]);
      });
      child.once("exit", (code) => reject(new Error(`exited ${code} before listening`)));
    });
    // About 1,500 access-log lines, several times what the pipe holds.
    const { fetch, agent } = trustingFetch(readFileSync(path.join(dir, "data/tls/cert.pem"), "utf8"));
    let answered = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        for (let i = 0; i < 95; i++) {
          const res = await fetch(`${origin}/v1/models`);
          await res.arrayBuffer();
          answered++;
        }
      }),
    );
    await agent.close();
    assert.equal(answered, 1520);
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    child.kill("SIGTERM");
    const took = await goneWithin(child.pid!, 6000);
    assert.notEqual(took, null, "the server was still running 6 s after SIGTERM");
    assert.equal(await exited, 0, `a clean exit, after ${took} ms, not the deadline's`);
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    closeSync(readEnd);
  }
});

test("issue 42.14 spawnServer().stop() resolves for a server already killed by a signal (its exitCode is null, its signalCode set)", async () => {
  const dir = tempDir();
  const server = await spawnServer({ dataDir: path.join(dir, "data"), models: [] }, dir);
  const exited = new Promise((resolve) => server.child.once("exit", resolve));
  server.child.kill("SIGKILL");
  await exited;
  assert.equal(server.child.signalCode, "SIGKILL");
  const stopped = await Promise.race([server.stop(), new Promise((resolve) => setTimeout(resolve, 2000, "still waiting after 2 s").unref())]);
  assert.equal(stopped, null, "stop() answers at once with the child's exit code (null: it was killed)");
  rmSync(dir, { recursive: true, force: true });
});
