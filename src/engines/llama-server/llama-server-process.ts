import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import type { EngineLog } from "../engine-kind.ts";

export interface ProcessSpec {
  binary: string;
  /** Everything but host and port. */
  args: string[];
  startTimeoutMs: number;
}

/** Where one run of the process answers, and the key it takes. */
export interface LlamaServerEndpoint {
  /** `http://127.0.0.1:PORT` */
  origin: string;
  port: number;
  apiKey: string;
}

export interface ProcessHooks {
  /** A run answers /health (the first and every restart): the relay is pointed at it before `ready` turns true. */
  ready(endpoint: LlamaServerEndpoint): Promise<void> | void;
  /** A run ended unasked: nothing may be sent to its port any more (another process may take it). */
  exited(): void;
}

/** What llama-server prints once its HTTP socket is bound: `... listening on http://127.0.0.1:PORT`. */
const listeningLine = /listening on https?:\/\/\S+:(\d+)/;

const firstRestartMs = 1000;
const maxRestartMs = 30_000;
/** Up this long without a crash, the next crash restarts after the first delay again. */
const stableAfterMs = 60_000;

/**
 * One supervised llama-server on a loopback port: started and waited for (/health), restarted with exponential
 * backoff (1 s doubling to 30 s) when it exits unasked, stopped with SIGTERM (SIGKILL after 5 s).
 *
 * Each run takes a new random API key, given in its environment (LLAMA_API_KEY): /proc/PID/environ is readable by
 * our own user only, where the command line (/proc/PID/cmdline) is readable by every local user. Each run binds
 * port 0 itself and we read the port it got from its own output, so there is no moment when the port is chosen but
 * free for another process to take; a restart gets a new port, never the old one that someone may hold by then.
 */
export class LlamaServerProcess {
  private child: ChildProcess | null = null;
  private stopping = false;
  private restartTimer: NodeJS.Timeout | null = null;
  private restartDelayMs = firstRestartMs;
  private readyAt = 0;
  private stderrTail = "";
  /** The current run's port and key (null until it has bound its port). */
  private endpoint: LlamaServerEndpoint | null = null;
  /** Restarts since start, for the admin view and the tests. */
  restarts = 0;
  ready = false;

  private constructor(
    private readonly spec: ProcessSpec,
    private readonly log: EngineLog,
    private readonly hooks: ProcessHooks,
  ) {}

  static async start(spec: ProcessSpec, log: EngineLog, hooks: ProcessHooks, signal?: AbortSignal): Promise<LlamaServerProcess> {
    const process = new LlamaServerProcess(spec, log, hooks);
    await process.run(signal);
    return process;
  }

  /** The current run's port (0 before the first has bound one). */
  get port(): number {
    return this.endpoint?.port ?? 0;
  }

  get pid(): number | null {
    return this.child?.pid ?? null;
  }

  private async run(signal?: AbortSignal): Promise<void> {
    const apiKey = randomBytes(32).toString("base64url");
    const child = spawn(this.spec.binary, [...this.spec.args, "--host", "127.0.0.1", "--port", "0"], {
      stdio: ["ignore", "ignore", "pipe"],
      env: { ...process.env, LLAMA_API_KEY: apiKey },
    });
    this.child = child;
    this.endpoint = null;
    this.stderrTail = "";
    let head = "";
    child.stderr!.setEncoding("utf8").on("data", (d: string) => {
      this.stderrTail = (this.stderrTail + d).slice(-4000);
      if (this.child !== child || this.endpoint || head.length > 1_000_000) return;
      head += d;
      const port = listeningLine.exec(head)?.[1];
      if (port) this.endpoint = { origin: `http://127.0.0.1:${port}`, port: Number(port), apiKey };
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    child.once("error", () => undefined);
    void exited.then((code) => this.onExit(child, code));
    const deadline = Date.now() + this.spec.startTimeoutMs;
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`llama-server exited (${child.exitCode ?? child.signalCode}) while starting:\n${this.stderrTail}`);
      if (signal?.aborted) {
        child.kill("SIGKILL");
        throw signal.reason;
      }
      if (this.endpoint && (await this.healthy(this.endpoint))) break;
      if (Date.now() > deadline) {
        child.kill("SIGKILL");
        const why = this.endpoint ? "did not answer /health" : "did not say which port it listens on";
        throw new Error(`llama-server ${why} within ${this.spec.startTimeoutMs} ms:\n${this.stderrTail}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    try {
      await this.hooks.ready(this.endpoint!);
    } catch (err) {
      child.kill("SIGKILL");
      throw err;
    }
    this.ready = true;
    this.readyAt = Date.now();
  }

  /** /health is the one path llama-server answers without its key. */
  private async healthy(endpoint: LlamaServerEndpoint): Promise<boolean> {
    try {
      const res = await fetch(`${endpoint.origin}/health`, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      return res.ok;
    } catch {
      return false;
    }
  }

  private onExit(child: ChildProcess, code: number | null): void {
    if (this.child !== child || this.stopping || !this.ready) return;
    this.ready = false;
    this.endpoint = null;
    this.hooks.exited();
    if (Date.now() - this.readyAt > stableAfterMs) this.restartDelayMs = firstRestartMs;
    const delay = this.restartDelayMs;
    this.restartDelayMs = Math.min(this.restartDelayMs * 2, maxRestartMs);
    this.log.error({ code, restartInMs: delay, stderr: this.stderrTail.slice(-1000) }, "llama-server exited; restarting");
    this.restartTimer = setTimeout(() => void this.restart(), delay);
    this.restartTimer.unref();
  }

  private async restart(): Promise<void> {
    this.restartTimer = null;
    if (this.stopping) return;
    this.restarts++;
    try {
      await this.run();
      this.log.info({ restarts: this.restarts }, "llama-server restarted");
    } catch (err) {
      this.log.error({ err }, "llama-server restart failed");
      // onExit did not schedule the next try (the process never became ready): do it here.
      if (!this.stopping && !this.ready) {
        const delay = this.restartDelayMs;
        this.restartDelayMs = Math.min(this.restartDelayMs * 2, maxRestartMs);
        this.restartTimer = setTimeout(() => void this.restart(), delay);
        this.restartTimer.unref();
      }
    }
  }

  /** Milliseconds until a restart is tried again (for Retry-After while restarting). */
  get retryAfterMs(): number {
    return Math.max(1000, Math.min(this.restartDelayMs, maxRestartMs));
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.ready = false;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      const kill = setTimeout(() => child.kill("SIGKILL"), 5000);
      child.once("exit", () => {
        clearTimeout(kill);
        resolve();
      });
      child.kill("SIGTERM");
    });
  }
}
