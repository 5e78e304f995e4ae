import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import type { EngineLog } from "../engine-kind.ts";

/** A free loopback port, from the kernel (listen on 0, read it, close). */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

export interface ProcessSpec {
  binary: string;
  /** Everything but host and port. */
  args: string[];
  startTimeoutMs: number;
}

const firstRestartMs = 1000;
const maxRestartMs = 30_000;
/** Up this long without a crash, the next crash restarts after the first delay again. */
const stableAfterMs = 60_000;

/**
 * One supervised llama-server on a loopback port: started and waited for (/health), restarted with exponential
 * backoff (1 s doubling to 30 s) on the same port when it exits unasked, stopped with SIGTERM (SIGKILL after 5 s).
 */
export class LlamaServerProcess {
  private child: ChildProcess | null = null;
  private stopping = false;
  private restartTimer: NodeJS.Timeout | null = null;
  private restartDelayMs = firstRestartMs;
  private readyAt = 0;
  private stderrTail = "";
  /** Restarts since start, for the admin view and the tests. */
  restarts = 0;
  ready = false;

  private constructor(
    private readonly spec: ProcessSpec,
    readonly port: number,
    private readonly log: EngineLog,
  ) {}

  static async start(spec: ProcessSpec, log: EngineLog, signal?: AbortSignal): Promise<LlamaServerProcess> {
    const process = new LlamaServerProcess(spec, await freeLoopbackPort(), log);
    await process.run(signal);
    return process;
  }

  get origin(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get pid(): number | null {
    return this.child?.pid ?? null;
  }

  private async run(signal?: AbortSignal): Promise<void> {
    const child = spawn(this.spec.binary, [...this.spec.args, "--host", "127.0.0.1", "--port", String(this.port)], { stdio: ["ignore", "ignore", "pipe"] });
    this.child = child;
    this.stderrTail = "";
    child.stderr!.setEncoding("utf8").on("data", (d: string) => (this.stderrTail = (this.stderrTail + d).slice(-4000)));
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
      if (await this.healthy()) break;
      if (Date.now() > deadline) {
        child.kill("SIGKILL");
        throw new Error(`llama-server did not answer /health within ${this.spec.startTimeoutMs} ms:\n${this.stderrTail}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    this.ready = true;
    this.readyAt = Date.now();
  }

  private async healthy(): Promise<boolean> {
    try {
      const res = await fetch(`${this.origin}/health`, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      return res.ok;
    } catch {
      return false;
    }
  }

  private onExit(child: ChildProcess, code: number | null): void {
    if (this.child !== child || this.stopping || !this.ready) return;
    this.ready = false;
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
