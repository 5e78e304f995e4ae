// Issue 37: readable log lines on a terminal, JSON elsewhere, and each start-up message once.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import YAML from "yaml";
import { cliPath, spawnServer, tempDir, trustingFetch } from "../harness/server.ts";

/** One missing model (reported once), a short shutdown. */
function config(dir: string) {
  return {
    dataDir: path.join(dir, "data"),
    server: { shutdownTimeout: "1s" },
    models: [{ id: "gone", engine: "llama", source: path.join(dir, "gone.gguf"), capabilities: ["chat"] }],
  };
}

const ansi = /\u001b\[[0-9;]*m/g;
const quote = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;

/** Resolves once the child's stdout and stderr are closed: 'exit' can come before the last of their data. */
function drained(child: import("node:child_process").ChildProcess): Promise<void> {
  if (child.stdout?.closed !== false && child.stderr?.closed !== false) return Promise.resolve();
  return new Promise((resolve) => child.once("close", () => resolve()));
}

async function until(condition: () => boolean, ms: number, what: () => string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting: ${what()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * `modelgate serve` with stdout and stderr on a pseudo-terminal (util-linux `script`); `exec` makes the server the
 * terminal's process itself, so it gets the SIGTERM. Returns what the terminal showed, ANSI colours removed.
 */
async function serveOnTerminal(dir: string, env: NodeJS.ProcessEnv = {}): Promise<string[]> {
  const file = path.join(dir, "config.yaml");
  writeFileSync(file, YAML.stringify(config(dir)));
  const command = `exec ${[process.execPath, cliPath, "serve", "--config", file, "--port", "0"].map(quote).join(" ")}`;
  const script = spawn("script", ["-qfec", command, "/dev/null"], { env: { ...process.env, ...env }, stdio: ["pipe", "pipe", "pipe"] });
  let screen = "";
  script.stdout.setEncoding("utf8").on("data", (d: string) => (screen += d));
  const exited = new Promise<number | null>((resolve) => script.once("exit", (code) => resolve(code)));
  try {
    await until(() => /listening https:\/\/\S+/.test(screen), 60_000, () => screen);
    const origin = /listening (https:\/\/[^\s]+)/.exec(screen.replace(ansi, ""))![1];
    const { fetch, agent } = trustingFetch(readFileSync(path.join(dir, "data/tls/cert.pem"), "utf8"));
    assert.equal((await fetch(`${origin}/healthz`)).status, 200);
    await agent.close();
    await until(() => screen.includes("/healthz"), 10_000, () => screen);
    const server = Number(readFileSync(`/proc/${script.pid}/task/${script.pid}/children`, "utf8").trim().split(/\s+/)[0]);
    process.kill(server, "SIGTERM");
    assert.equal(await exited, 0, screen);
    await drained(script);
  } finally {
    if (script.exitCode === null) script.kill("SIGKILL");
  }
  return screen.replace(ansi, "").split(/\r?\n/).filter(Boolean);
}

test("issue 37 on a terminal, serve prints readable log lines (time, level, message, fields), no JSON, and each start-up message once", async () => {
  const lines = await serveOnTerminal(tempDir());
  assert.deepEqual(lines.filter((l) => l.trimStart().startsWith("{")), [], "no JSON line");
  assert.ok(lines.some((l) => /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: GET \/healthz 200 [\d.]+ ms req_\w+$/.test(l)), lines.join("\n"));
  assert.ok(lines.some((l) => /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: store migration applied migration=\S+$/.test(l)), lines.join("\n"));
  assert.ok(lines.some((l) => /INFO: shutting down signal=SIGTERM$/.test(l)), lines.join("\n"));
  assert.equal(lines.filter((l) => l.includes("gone")).length, 1, `the missing model once:\n${lines.join("\n")}`);
  assert.equal(lines.filter((l) => /listening/i.test(l)).length, 1, `listening once:\n${lines.join("\n")}`);
  assert.equal(lines.filter((l) => l.includes("sha256")).length, 1, "the certificate once");
});

test("issue 37 MODELGATE_LOG_FORMAT=json on a terminal gives JSON lines", async () => {
  const lines = await serveOnTerminal(tempDir(), { MODELGATE_LOG_FORMAT: "json" });
  const records = lines.filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as { msg: string; status?: number });
  assert.ok(records.some((r) => r.msg === "request" && r.status === 200), lines.join("\n"));
});

test("issue 37 on a pipe, serve logs JSON, with the start-up facts as fields; stdout has the summary once", async () => {
  const dir = tempDir();
  // An empty tls/ folder: this start generates its certificate, rather than the harness's shared one.
  mkdirSync(path.join(dir, "data", "tls"), { recursive: true });
  const server = await spawnServer(config(dir), dir);
  await server.stop("SIGTERM");
  await drained(server.child);
  const records = server.stderr.join("").split("\n").filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
  const started = records.find((r) => r.msg === "started")!;
  assert.ok(started, "a started record");
  assert.equal(started.startup, true);
  assert.match(String(started.url), /^https:\/\/127\.0\.0\.1:\d+$/);
  assert.equal((started.cert as { generated: boolean }).generated, true);
  const missing = records.filter((r) => r.model === "gone");
  assert.deepEqual(missing.map((r) => [r.level, r.state, r.startup]), [[40, "missing", true]], "the missing model once, as fields");
  assert.equal(server.stdout.join("").split("\n").filter((l) => l.includes("gone")).length, 1, "and once in the summary");
});

test("issue 37 logFormat: pretty gives readable lines on a pipe too (no colours)", async () => {
  const dir = tempDir();
  const server = await spawnServer({ ...config(dir), logFormat: "pretty" }, dir);
  await server.stop("SIGTERM");
  await drained(server.child);
  const lines = server.stderr.join("").split("\n").filter(Boolean);
  assert.ok(lines.some((l) => /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: shutting down signal=SIGTERM$/.test(l)), lines.join("\n"));
  assert.equal(lines.filter((l) => l.includes("\u001b[")).length, 0, "no colours off a terminal");
});
