import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { createServer } from "node:net";
import { Agent } from "undici";

/**
 * llama.cpp's own `llama-server`, built by ../shared/tools/peers/build-llama-server.sh from the llama.cpp source
 * node-llama-cpp ships (.ci/run builds it when it is missing). Tests that use it fail without it: they never skip.
 */
export function llamaServerBinary(): string {
  if (process.env.MODELGATE_LLAMA_SERVER) return process.env.MODELGATE_LLAMA_SERVER;
  const cache = process.env.MODELGATE_PEER_CACHE ?? path.join(homedir(), ".cache/modelgate-peers");
  const builds = existsSync(cache) ? readdirSync(cache).filter((d) => d.startsWith("llama-server-")) : [];
  const binary = builds.map((d) => path.join(cache, d, "build/bin/llama-server")).find((b) => existsSync(b));
  if (!binary) throw new Error(`llama-server is not built under ${cache}: run ../shared/tools/peers/build-llama-server.sh . (.ci/run does)`);
  return binary;
}

/** A free loopback port, from the kernel (listen on 0, read it, close). Tests only: the port is free until bound. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

/**
 * Requests to a peer each on a fresh connection (no keep-alive). llama-server closes a connection idle for 5 s; a
 * pooled one reused just then (a loaded machine runs the pool's own 4 s timer late) fails with "other side closed".
 */
const direct = new Agent({ pipelining: 0 });

export interface LlamaServer {
  child: ChildProcess;
  /** `http://127.0.0.1:PORT` */
  origin: string;
  /** A request to `origin` + `path`, on a connection of its own. */
  fetch(path: string, init?: RequestInit): Promise<Response>;
  stop(): Promise<void>;
}

/** Starts llama-server on a free loopback port (or `port`: a restart) and resolves once its /health says ok. */
export async function startLlamaServer(model: string, args: string[] = [], port?: number): Promise<LlamaServer> {
  port ??= await freePort();
  const child = spawn(llamaServerBinary(), ["-m", model, "--host", "127.0.0.1", "--port", String(port), "--no-webui", ...args], { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (log = (log + d).slice(-4000)));
  const origin = `http://127.0.0.1:${port}`;
  const peerFetch = (target: string, init?: RequestInit) => fetch(`${origin}${target}`, { ...init, dispatcher: direct } as RequestInit);
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`llama-server exited with ${child.exitCode ?? child.signalCode}:\n${log}`);
    const ok = await peerFetch("/health").then(
      async (r) => (await r.arrayBuffer(), r.ok),
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`llama-server did not become healthy:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    child,
    origin,
    fetch: peerFetch,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}
