import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import YAML from "yaml";
import { createKey } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { cliPath, tempDir } from "../harness/server.ts";
import { ratioRow, spread, type BenchRow } from "./bench-row.ts";
import { benchRateLimit, throughput } from "./processes.ts";

/**
 * Issue 37: on a terminal the log is readable lines (pino-pretty) instead of JSON; it must not cost the gateway
 * more. The gateway bench's request (authenticated GET /v1/models, an access line per request at the default level
 * `info`) against two `modelgate serve` processes, both with stdout and stderr on a pseudo-terminal of their own
 * (util-linux `script`, whose copy of the terminal's output this process reads and drops): one in the default format
 * for a terminal (pretty), one with MODELGATE_LOG_FORMAT=json. Only the format differs, the terminal costs the same
 * on both sides (no terminal emulator draws the lines: that cost is not the gateway's). autocannon, in its own
 * process, runs 16 connections for SECONDS against each, alternating which goes first; RUNS rounds.
 */
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const SECONDS = 5;

interface TtyServer {
  script: ChildProcess;
  origin: string;
  stop(): Promise<void>;
}

const quote = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;

async function serveOnTerminal(raw: Record<string, unknown>, dir: string, env: NodeJS.ProcessEnv): Promise<TtyServer> {
  const file = path.join(dir, "config.yaml");
  writeFileSync(file, YAML.stringify(raw));
  const command = `exec ${[process.execPath, cliPath, "serve", "--config", file, "--port", "0"].map(quote).join(" ")}`;
  const script = spawn("script", ["-qfec", command, "/dev/null"], { env: { ...process.env, ...env }, stdio: ["pipe", "pipe", "inherit"] });
  let screen = "";
  script.stdout!.setEncoding("utf8").on("data", (d: string) => {
    if (screen.length < 65_536) screen += d;
  });
  const origin = await new Promise<string>((resolve, reject) => {
    const timer = setInterval(() => {
      const match = /listening (https:\/\/[^\s\u001b]+)/.exec(screen);
      if (match) {
        clearInterval(timer);
        resolve(match[1]);
      }
    }, 50);
    script.once("exit", (code) => reject(new Error(`serve exited ${code}: ${screen}`)));
  });
  return {
    script,
    origin,
    async stop() {
      const server = Number(readFileSync(`/proc/${script.pid}/task/${script.pid}/children`, "utf8").trim().split(/\s+/)[0]);
      const exited = new Promise((resolve) => script.once("exit", resolve));
      process.kill(server, "SIGTERM");
      await exited;
    },
  };
}

export default async function gatewayTtyBench(): Promise<BenchRow[]> {
  const sides = { pretty: {}, json: { MODELGATE_LOG_FORMAT: "json" } } as const;
  const servers: Partial<Record<keyof typeof sides, { server: TtyServer; key: string }>> = {};
  try {
    for (const [name, env] of Object.entries(sides) as [keyof typeof sides, NodeJS.ProcessEnv][]) {
      const dir = tempDir(`bench-tty-${name}-`);
      const raw = {
        dataDir: dir,
        plans: { bench: { rateLimit: benchRateLimit } },
        defaultPlan: "bench",
        models: [{ id: "bench-chat", engine: "llama", source: "/nonexistent/bench-chat.gguf", capabilities: ["chat"], load: "lazy" }],
      };
      const server = await serveOnTerminal(raw, dir, env);
      const { key } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
      servers[name] = { server, key };
    }
    const url = (name: keyof typeof sides) => `${servers[name]!.server.origin}/v1/models`;
    const rps = { pretty: [] as number[], json: [] as number[] };
    // Warm-up: JIT, TLS sessions, the key cache.
    for (const name of ["pretty", "json"] as const) await throughput({ url: url(name), key: servers[name]!.key, seconds: 2 });
    for (let i = 0; i < RUNS; i++) {
      process.stderr.write(`  run ${i + 1}/${RUNS}\n`);
      for (const name of i % 2 === 0 ? (["pretty", "json"] as const) : (["json", "pretty"] as const)) {
        rps[name].push(await throughput({ url: url(name), key: servers[name]!.key, seconds: SECONDS }));
      }
    }
    process.stderr.write(`  pretty req/s ${JSON.stringify(spread(rps.pretty))}, json req/s ${JSON.stringify(spread(rps.json))}\n`);
    return [
      ratioRow({
        item: "gateway on a terminal: pretty log lines req/s vs JSON lines (both on a pty, c=16, log level info)",
        service: rps.pretty,
        raw: rps.json,
        unit: "req/s",
        target: ">= 1 (within noise)",
      }),
    ];
  } finally {
    for (const side of Object.values(servers)) await side?.server.stop();
  }
}
