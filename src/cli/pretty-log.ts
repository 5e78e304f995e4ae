import { prettyFactory } from "pino-pretty";

type LogRecord = Record<string, unknown>;

/** Keys every line shows in its own place (time, level, message) or that say nothing to a person at a terminal. */
const shownElsewhere = new Set(["level", "time", "msg", "pid", "hostname", "reqId", "err", "startup"]);

const scalar = (value: unknown): value is string | number | boolean => ["string", "number", "boolean"].includes(typeof value);

/** `GET /v1/models 200 1.2 ms model=m code=c req-…`: the access line's few fields that matter. */
function accessLine(log: LogRecord): string {
  const parts = [log.method, log.route, log.status, `${log.ms} ms`];
  if (log.model) parts.push(`model=${log.model}`);
  if (log.code) parts.push(`code=${log.code}`);
  return parts.join(" ");
}

/** The message, then the record's other plain fields as key=value; the request id last. */
function messageOf(log: LogRecord): string {
  let text = log.msg === "request" && log.status !== undefined ? accessLine(log) : String(log.msg ?? "");
  if (log.msg !== "request") {
    for (const [key, value] of Object.entries(log)) {
      if (shownElsewhere.has(key)) continue;
      if (scalar(value)) text += ` ${key}=${value}`;
      else if (Array.isArray(value) && value.every(scalar)) text += ` ${key}=${value.join(",")}`;
    }
  }
  if (log.reqId) text += ` ${log.reqId}`;
  const err = log.err as { type?: string; message?: string; stack?: string } | undefined;
  if (err && typeof err === "object") text += `\n${err.stack ?? `${err.type ?? "Error"}: ${err.message}`}`.replace(/^/gm, "    ").slice(4);
  return text;
}

/** What pino tells a destination about the record it is writing (its `pino.metadata` interface). */
export interface LastRecord {
  lastLevel?: number;
  lastMsg?: string;
  lastObj?: Record<string, unknown>;
  /** Epoch milliseconds, as text. */
  lastTime?: string;
}

const two = (n: number) => (n < 10 ? `0${n}` : String(n));
const three = (n: number) => (n < 10 ? `00${n}` : n < 100 ? `0${n}` : String(n));

/**
 * The access line, once per request, formatted straight from the object pino was given (no JSON parse, no
 * pino-pretty pass), in pino-pretty's layout: `[HH:MM:ss.l] INFO: GET /v1/models 200 1.2 ms req_…`.
 */
class AccessLines {
  private second = -1;
  private clock = "";
  constructor(private readonly colors: boolean) {}

  format(time: number, log: Record<string, unknown>, reqId: string | undefined): string {
    const second = Math.floor(time / 1000);
    if (second !== this.second) {
      const d = new Date(time);
      this.second = second;
      this.clock = `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
    }
    let text = accessLine(log);
    if (reqId) text += ` ${reqId}`;
    const stamp = `[${this.clock}.${three(time % 1000)}]`;
    return this.colors ? `${stamp} \u001b[32mINFO\u001b[39m: \u001b[36m${text}\u001b[39m\n` : `${stamp} INFO: ${text}\n`;
  }
}

const reqIdPattern = /"reqId":"([^"]*)"/;

/**
 * Readable lines for a terminal (pino-pretty): time, level, message and the few fields that matter. Records marked
 * `startup` are not shown: `serve` has printed the same facts as its summary for people. The access line, the one
 * logged per request, takes a path of its own that costs about what writing its JSON does.
 */
export function prettyFormatter(options: { colors: boolean }): (line: string, last?: LastRecord) => string | null {
  const pretty = prettyFactory({
    colorize: options.colors,
    translateTime: "SYS:HH:MM:ss.l",
    hideObject: true,
    ignore: "",
    messageFormat: (log) => messageOf(log),
  });
  const access = new AccessLines(options.colors);
  return (line, last) => {
    if (last?.lastMsg === "request" && last.lastLevel === 30 && typeof last.lastObj?.status === "number") {
      return access.format(Number(last.lastTime), last.lastObj, reqIdPattern.exec(line)?.[1]);
    }
    let record: LogRecord;
    try {
      record = JSON.parse(line) as LogRecord;
    } catch {
      return line;
    }
    // Fastify's own "Server listening at" line says what the summary's `listening` line says.
    if (record.startup || (typeof record.msg === "string" && record.msg.startsWith("Server listening at "))) return null;
    return pretty(record);
  };
}
