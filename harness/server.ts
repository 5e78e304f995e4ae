import { copyFileSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { spawn, type ChildProcess } from "node:child_process";
import { Agent } from "undici";
import OpenAI from "openai";
import YAML from "yaml";
import { testConfig } from "./config.ts";
import { buildConfig } from "../src/config/load-config.ts";
import type { AppConfig } from "../src/config/app-config.ts";
import type { Server, ServerOptions } from "../src/server.ts";
import { loadOrCreateTls } from "../src/http/tls.ts";
import { createKey, type CreateKeyOptions } from "./keys.ts";
import { buildDist, distIsFresh } from "./dist-freshness.mjs";

export const repoRoot = path.resolve(import.meta.dirname, "..");
export const modelsDir = path.resolve(repoRoot, "../shared/models");
/** The CLI as `npx modelgate` runs it: the sources through tsx. */
export const sourceCliPath = path.join(repoRoot, "bin/modelgate.js");
/**
 * The CLI the tests spawn (servers and commands): the compiled build, as `npm start` runs it, when it was built after
 * the last change under src/ (npm test builds it first when not), else the sources. A server spawned from dist/
 * starts on about 0.5 s less CPU than through tsx, and the suite spawns about 140.
 */
export const cliPath = distIsFresh(repoRoot) ? path.join(repoRoot, "dist/cli/run.js") : sourceCliPath;

/**
 * `npm run build` of the tree, and the compiled server's entry point: the server as `npm start` and the Dockerfile run
 * it, where `sourceCliPath` runs the sources through tsx (which also turns source maps on: every file an error's stack
 * passes through has its map parsed and kept). It builds whether or not dist/ is fresh.
 */
export function compiledCliPath(): string {
  buildDist(repoRoot);
  return path.join(repoRoot, "dist/cli/run.js");
}

export type TlsFetch = (input: string, init?: RequestInit) => Promise<Response>;

/** A fetch that trusts exactly the server's certificate (TLS verification stays on). */
export function trustingFetch(ca: string): { fetch: TlsFetch; agent: Agent } {
  const agent = new Agent({ connect: { ca } });
  const tlsFetch: TlsFetch = (input, init) => fetch(input, { ...init, dispatcher: agent } as RequestInit);
  return { fetch: tlsFetch, agent };
}

/** Options of the one request helper: the key (Bearer), extra headers, an abort signal. */
export interface RequestOptions {
  key?: string;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  method?: string;
}

/** The one request helper: JSON (or FormData) POSTs and GETs against an origin, with a key as Bearer token. */
export function requester(tlsFetch: TlsFetch, origin: string): Pick<TestServer, "post" | "get"> {
  const headersOf = (options: RequestOptions, json: boolean) => ({
    ...(options.key ? { authorization: `Bearer ${options.key}` } : {}),
    ...(json ? { "content-type": "application/json" } : {}),
    ...options.headers,
  });
  return {
    post: (target, body, options = {}) => {
      const form = body instanceof FormData;
      return tlsFetch(`${origin}${target}`, {
        method: options.method ?? "POST",
        headers: headersOf(options, !form),
        body: form ? body : JSON.stringify(body),
        signal: options.signal,
      });
    },
    get: (target, options = {}) => tlsFetch(`${origin}${target}`, { method: options.method ?? "GET", headers: headersOf(options, false), signal: options.signal }),
  };
}

export interface TestServer {
  config: AppConfig;
  server: Server;
  origin: string;
  baseURL: string;
  ca: string;
  fetch: TlsFetch;
  /** The undici dispatcher `fetch` uses, trusting this server's certificate: for other clients (anthropic-client.ts). */
  dispatcher: Agent;
  /**
   * POSTs to a path on this server (`/v1/chat/completions`): a FormData body goes as multipart, anything else as
   * JSON; `key` is sent as a Bearer token.
   */
  post(path: string, body: unknown, options?: RequestOptions): Promise<Response>;
  /** GET (or `method`) without a body. */
  get(path: string, options?: RequestOptions): Promise<Response>;
  /** The official openai client pointed at this server; retries off unless asked for. */
  openai(apiKey: string, options?: { maxRetries?: number; timeout?: number }): OpenAI;
  /** Creates an account and key in this server's store. */
  createKey(options?: CreateKeyOptions): Promise<{ key: string; id: string; accountId: string }>;
  close(): Promise<void>;
}

/** The directories tempDir made: removed when the process exits (each test file and bench is a process of its own). */
const madeDirs: string[] = [];

export function tempDir(prefix = "modelgate-test-"): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  if (madeDirs.push(dir) === 1) process.once("exit", () => madeDirs.forEach((made) => rmSync(made, { recursive: true, force: true })));
  return dir;
}

/**
 * The generated certificate and key test servers start with (seedTestTls), made once per checkout (.cache/test-tls):
 * a server that finds them in its data dir uses them, so neither a test file nor a spawned server loads the
 * certificate generator (about 250 ms of CPU with the generation). The first start's generation has its own tests
 * (tls-certificate, core-cli, log-format), and servers the CLI starts (runCli) still do it.
 */
async function sharedTestTls(): Promise<string> {
  const shared = path.join(repoRoot, ".cache", "test-tls");
  if (!existsSync(shared)) {
    mkdirSync(path.dirname(shared), { recursive: true });
    const made = mkdtempSync(`${shared}-`);
    await loadOrCreateTls(null, made);
    // One rename of the whole folder: a concurrent test file that made its own first keeps the pair it sees whole.
    try {
      renameSync(made, shared);
    } catch {
      rmSync(made, { recursive: true, force: true });
    }
  }
  return path.join(shared, "tls");
}

/**
 * Puts the shared test certificate into `dataDir`/tls, unless that folder is there already (a test that wants the
 * first start's generation makes it empty beforehand).
 */
async function seedTestTls(dataDir: string): Promise<void> {
  const target = path.join(dataDir, "tls");
  if (existsSync(target)) return;
  const tls = await sharedTestTls();
  mkdirSync(target, { recursive: true, mode: 0o700 });
  for (const file of ["cert.pem", "key.pem"]) copyFileSync(path.join(tls, file), path.join(target, file));
}

/** Starts the real server in-process over TLS on a random port, with a fresh data dir. */
export async function startServer(rawConfig: Record<string, unknown> = {}, options: ServerOptions & { dataDir?: string } = {}): Promise<TestServer> {
  let dataDir = options.dataDir;
  if (!dataDir) {
    dataDir = tempDir();
    await seedTestTls(dataDir);
  }
  const withData = { dataDir, ...rawConfig, server: { host: "127.0.0.1", port: 0, ...(rawConfig.server as object | undefined) } };
  const configFile = path.join(repoRoot, "test/config.yaml");
  const config = options.engines ? buildConfig(withData, configFile, options.engines) : testConfig(withData, configFile);
  // Imported here: a test file that only spawns servers or runs the CLI does not load the whole server (about 1 s of CPU).
  const { buildServer } = await import("../src/server.ts");
  const server = await buildServer(config, { logger: false, ...options });
  const port = await server.listen();
  await server.ctx.catalog.loadEager();
  const origin = `https://127.0.0.1:${port}`;
  const { fetch: tlsFetch, agent } = trustingFetch(server.tls.cert);
  return {
    config,
    server,
    origin,
    baseURL: `${origin}/v1`,
    ca: server.tls.cert,
    fetch: tlsFetch,
    dispatcher: agent,
    ...requester(tlsFetch, origin),
    openai: (apiKey, clientOptions = {}) =>
      new OpenAI({
        apiKey,
        baseURL: `${origin}/v1`,
        maxRetries: clientOptions.maxRetries ?? 0,
        timeout: clientOptions.timeout ?? 60_000,
        fetchOptions: { dispatcher: agent } as never,
      }),
    createKey: (keyOptions) => createKey(config, keyOptions ?? {}),
    async close() {
      await server.close();
      await agent.close();
      if (!options.dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export interface SpawnedServer {
  child: ChildProcess;
  origin: string;
  stdout: string[];
  stderr: string[];
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Writes a YAML config and starts `modelgate serve` as a separate process; resolves at its `listening` line.
 * `entry` is the CLI script (`cliPath` by default, or a compiled build's dist/cli/run.js); `nodeArgs` go
 * before it (V8 flags that NODE_OPTIONS refuses, such as --no-memory-reducer).
 */
export async function spawnServer(
  rawConfig: Record<string, unknown>,
  dir: string,
  extraArgs: string[] = [],
  env: NodeJS.ProcessEnv = {},
  entry = cliPath,
  nodeArgs: string[] = [],
): Promise<SpawnedServer> {
  const configFile = path.join(dir, `config-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(configFile, YAML.stringify(rawConfig));
  if (typeof rawConfig.dataDir === "string") await seedTestTls(path.resolve(dir, rawConfig.dataDir));
  const child = spawn(process.execPath, [...nodeArgs, entry, "serve", "--config", configFile, "--port", "0", ...extraArgs], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const stdout: string[] = [];
  const stderr: string[] = [];
  child.stderr!.setEncoding("utf8").on("data", (d: string) => stderr.push(d));
  const origin = await new Promise<string>((resolve, reject) => {
    let buffer = "";
    // Detached once it listens: its log may grow past the longest string V8 can join by the time it exits.
    const exited = (code: number | null) => reject(new Error(`server exited with ${code} before listening:\n${stderr.join("")}`));
    const slow = setTimeout(() => reject(new Error(`server did not start in time:\n${stderr.join("")}`)), 60_000).unref();
    child.stdout!.setEncoding("utf8").on("data", (d: string) => {
      buffer += d;
      stdout.push(d);
      const match = /listening (https:\/\/\S+)/.exec(buffer);
      if (!match) return;
      child.off("exit", exited);
      clearTimeout(slow);
      resolve(match[1]);
    });
    child.once("exit", exited);
  });
  return {
    child,
    origin,
    stdout,
    stderr,
    stop(signal = "SIGTERM") {
      // A child killed by a signal has exited with exitCode null: its signalCode says it is gone.
      if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
      return new Promise((resolve) => {
        child.once("exit", (code) => resolve(code));
        child.kill(signal);
      });
    },
  };
}

/** Runs the CLI to completion and returns its exit code and output. */
export function runCli(args: string[], env: NodeJS.ProcessEnv = {}, entry = cliPath): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [entry, ...args], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d) => (stderr += d));
    child.once("exit", (code) => resolve({ code, stdout, stderr }));
  });
}

export function writeConfig(dir: string, raw: Record<string, unknown> | string, name = "config.yaml"): string {
  const file = path.join(dir, name);
  writeFileSync(file, typeof raw === "string" ? raw : YAML.stringify(raw));
  return file;
}
