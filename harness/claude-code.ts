import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { repoRoot, tempDir } from "./server.ts";

const packageDir = path.join(repoRoot, "node_modules/@anthropic-ai/claude-code");
/** The package's `bin` entry: a small stub until its install script puts the platform binary there. */
const claudeBinary = path.join(packageDir, "bin/claude.exe");
/** install.cjs tells the stub from the binary the same way (a stub is a few hundred bytes). */
const stubBytes = 4096;

/**
 * Puts Claude Code's platform binary in place once: its install script is denied in `allowScripts`, so a fresh
 * `npm ci` leaves the stub. install.cjs only links or copies the binary from the platform package npm already
 * installed; it touches no network. Idempotent.
 */
function ensureClaudeCode(): string {
  if (statSync(claudeBinary).size > stubBytes) return claudeBinary;
  const run = spawnSync(process.execPath, [path.join(packageDir, "install.cjs")], { encoding: "utf8" });
  if (run.status !== 0 || statSync(claudeBinary).size <= stubBytes) {
    throw new Error(`Claude Code's install.cjs did not place the binary (exit ${run.status}):\n${run.stderr}`);
  }
  return claudeBinary;
}

export interface ClaudeCodeOptions {
  /** The server's origin (`https://127.0.0.1:PORT`): ANTHROPIC_BASE_URL. */
  origin: string;
  /** The server's certificate (PEM), trusted through NODE_EXTRA_CA_CERTS. */
  ca: string;
  /** A Modelgate key: ANTHROPIC_API_KEY. */
  apiKey: string;
  model: string;
  prompt: string;
  /** More command-line options (`--tools`, `--bare`...). */
  args?: string[];
  /** More environment (CLAUDE_CODE_MAX_OUTPUT_TOKENS...). */
  env?: Record<string, string>;
  timeoutMs?: number;
}

export interface ClaudeCodeRun {
  code: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

/**
 * `claude -p PROMPT` headless against a Modelgate server. It gets a fresh HOME, config dir and working directory
 * (so no user settings, CLAUDE.md or git status reach its prompt) and an environment of its own, not this
 * process's: nothing from the caller's ANTHROPIC_* variables leaks in. Non-essential traffic (telemetry, update
 * checks) is off, so the one host it talks to is the server.
 */
export async function runClaudeCode(options: ClaudeCodeOptions): Promise<ClaudeCodeRun> {
  const binary = ensureClaudeCode();
  const home = tempDir("modelgate-claude-");
  const workDir = path.join(home, "project");
  mkdirSync(workDir);
  const caFile = path.join(home, "modelgate-ca.pem");
  writeFileSync(caFile, options.ca);
  const env = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: home,
    CLAUDE_CONFIG_DIR: path.join(home, ".claude"),
    ANTHROPIC_BASE_URL: options.origin,
    ANTHROPIC_API_KEY: options.apiKey,
    ANTHROPIC_MODEL: options.model,
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    NODE_EXTRA_CA_CERTS: caFile,
    ...options.env,
  };
  try {
    return await new Promise<ClaudeCodeRun>((resolve, reject) => {
      const child = spawn(binary, ["-p", options.prompt, ...(options.args ?? [])], { cwd: workDir, env, stdio: ["ignore", "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      let timedOut = false;
      child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
      child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
      const timer = setTimeout(() => {
        timedOut = true;
        child.kill("SIGKILL");
      }, options.timeoutMs ?? 60_000);
      child.once("error", reject);
      child.once("close", (code) => {
        clearTimeout(timer);
        resolve({ code, stdout, stderr, timedOut });
      });
    });
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}
