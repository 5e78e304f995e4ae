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

/**
 * Readable lines for a terminal (pino-pretty): time, level, message and the few fields that matter. Records marked
 * `startup` are not shown: `serve` has printed the same facts as its summary for people.
 */
export function prettyFormatter(options: { colors: boolean }): (line: string) => string | null {
  const pretty = prettyFactory({
    colorize: options.colors,
    translateTime: "SYS:HH:MM:ss.l",
    hideObject: true,
    ignore: "",
    messageFormat: (log) => messageOf(log),
  });
  return (line) => {
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
