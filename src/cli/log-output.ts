import { writeSync } from "node:fs";
import sonicBoom from "sonic-boom";
import { prettyFormatter, type LastRecord } from "./pretty-log.ts";

export type LogFormat = "json" | "pretty";

/** The configured format (`logFormat`, MODELGATE_LOG_FORMAT), else readable lines on a terminal and JSON elsewhere. */
export function logFormatFor(configured: LogFormat | null, stderrIsTTY: boolean): LogFormat {
  return configured ?? (stderrIsTTY ? "pretty" : "json");
}

// A CommonJS module whose class Node's ESM loader does not see as a named export.
const { SonicBoom } = sonicBoom;

/** The longest a log line waits in the buffer. */
const flushEveryMs = 250;
/** Lines are joined here and handed to SonicBoom in blocks of about this many characters (see `write`). */
const blockChars = 4096;
/** Past this, new lines are dropped while the reader does not keep up (a reader that stopped must not cost memory). */
const maxBufferedBytes = 16 * 1024 * 1024;

/**
 * Where `serve` writes its log (stderr), as the pino destination. Lines are written in blocks of at least 4 KB (a
 * write per access-log line cost about a tenth of the gateway's CPU under load) and at the latest every
 * `flushEveryMs`.
 *
 * Nothing here ever waits on the reader without a bound. A reader that has gone (EPIPE) turns the log off; a full
 * pipe is retried while the server runs, and given up at `finish`. No flush runs at process exit: pino's own
 * exit-time `flushSync` retries a write that fails with EPIPE or EAGAIN forever (issue 29.9, a futex wait), so the
 * destination is a SonicBoom of our own, not `pino.destination`, which registers that flush.
 */
/** Asks pino to set the last* fields before each write (its destination metadata interface). */
const wantsMetadata: unique symbol = Symbol.for("pino.metadata") as never;

export class LogOutput implements LastRecord {
  /** Pretty lines are made from what pino was given rather than parsed back from JSON. */
  readonly [wantsMetadata]: boolean;
  lastLevel?: number;
  lastMsg?: string;
  lastObj?: Record<string, unknown>;
  lastTime?: string;
  private readonly boom: InstanceType<typeof SonicBoom>;
  /** Lines not yet handed to SonicBoom, and their length in characters. */
  private block: string[] = [];
  private blockLength = 0;
  private readonly timer: NodeJS.Timeout;
  /** buffered: through SonicBoom; direct: one write attempt per line, after `finish`; off: dropped. */
  private mode: "buffered" | "direct" | "off" = "buffered";
  private givingUp = false;
  private readonly format: (line: string, last?: LastRecord) => string | null;
  private readonly fd: number;

  constructor(
    readonly logFormat: LogFormat,
    options: { fd?: number; colors?: boolean } = {},
  ) {
    const fd = (this.fd = options.fd ?? 2);
    this.format = logFormat === "pretty" ? prettyFormatter({ colors: options.colors ?? false }) : (line) => line;
    this[wantsMetadata] = logFormat === "pretty";
    this.boom = new SonicBoom({ fd, sync: false, minLength: 4096, maxLength: maxBufferedBytes, retryEAGAIN: () => !this.givingUp });
    // EPIPE (the reader has gone), or EAGAIN once given up: nothing more can be written.
    this.boom.on("error", () => (this.mode = "off"));
    this.timer = setInterval(() => {
      if (this.mode !== "buffered") return;
      this.handOver();
      this.boom.flush();
    }, flushEveryMs);
    this.timer.unref();
  }

  /** pino's destination interface: one serialized record, newline included. */
  write(line: string): void {
    if (this.mode === "off") return;
    const text = this.format(line, this);
    if (text === null) return;
    if (this.mode === "direct") return this.writeDirect(text);
    // Joined here, not appended one by one: SonicBoom measures the UTF-8 length of its whole pending block on every
    // write, about 3 µs a line at 4 KB blocks (2 µs of a 50-µs GET /v1/models under load).
    this.block.push(text);
    this.blockLength += text.length;
    if (this.blockLength >= blockChars) this.handOver();
  }

  /** The joined lines to SonicBoom, which writes them when no write is in flight. */
  private handOver(): void {
    if (this.block.length === 0) return;
    const text = this.block.length === 1 ? this.block[0]! : this.block.join("");
    this.block = [];
    this.blockLength = 0;
    try {
      this.boom.write(text);
    } catch {
      // Closed by finish() a moment ago.
      this.writeDirect(text);
    }
  }

  /**
   * Writes out what is buffered, waiting at most `ms`; what cannot be written by then is given up. Lines logged
   * after it are written at once, one attempt each, or dropped.
   */
  async finish(ms: number): Promise<void> {
    if (this.mode !== "buffered") return;
    clearInterval(this.timer);
    this.handOver();
    // end(), not flush(): a flush that meets a write in flight calls back once that write is done, with what is
    // under minLength still buffered; end() writes everything (it leaves stderr open).
    await new Promise<void>((resolve) => {
      const deadline = setTimeout(resolve, ms);
      this.boom.once("close", () => {
        clearTimeout(deadline);
        if (this.mode === "buffered") this.mode = "direct";
        resolve();
      });
      this.boom.end();
    });
    this.givingUp = true;
    if (this.mode === "buffered") this.mode = "direct";
  }

  private writeDirect(text: string): void {
    try {
      writeSync(this.fd, text);
    } catch {
      // A full pipe, a reader that has gone: no more waiting on it.
      this.mode = "off";
    }
  }

  /** For an exit that cannot wait: writes `last` with one attempt, then drops what is buffered and everything after. */
  abandon(last?: string): void {
    clearInterval(this.timer);
    this.givingUp = true;
    this.block = [];
    if (last && this.mode !== "off") this.writeDirect(last);
    this.mode = "off";
  }
}
