import type { IncomingMessage } from "node:http";
import { AppError } from "../errors/app-error.ts";

/**
 * A request body we will not read (refused, or too large) is still read and thrown away, up to this many bytes, so
 * the client reads our answer instead of a connection reset and the connection stays usable; past it the
 * connection is cut.
 */
export const discardCapBytes = 64 * 1024 * 1024;

/** How long a connection closing after an early answer keeps reading the rest of the body before it closes. */
export const lingerMs = 10_000;

const discarding = Symbol("discarding");

/**
 * Whether bytes of the request body are still to come off the wire. A request with neither a Content-Length above 0
 * nor a Transfer-Encoding has no body (RFC 9112 §6.3), though the parser may not have marked it complete yet: a
 * route answered while the parser is still on its headers (GET /v1/models) has nothing to discard or wait for.
 */
export function bodyPending(raw: IncomingMessage): boolean {
  if (raw.complete || raw.destroyed) return false;
  const length = raw.headers["content-length"];
  return raw.headers["transfer-encoding"] !== undefined || (length !== undefined && length !== "0");
}

/** Reads and discards what is left of the body (once; bounded by `discardCapBytes`), whoever was reading it. */
export function discardRest(raw: IncomingMessage): void {
  const marked = raw as IncomingMessage & { [discarding]?: boolean };
  if (marked[discarding]) return;
  marked[discarding] = true;
  let discarded = 0;
  raw.unpipe();
  raw.on("data", (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > discardCapBytes) raw.socket.destroy();
  });
  raw.resume();
}

/** Resolves when the body has been read to its end, the connection closed, or `ms` passed. */
export function untilBodyEnds(raw: IncomingMessage, ms: number): Promise<void> {
  if (!bodyPending(raw)) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      raw.off("end", done);
      raw.off("close", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    raw.once("end", done);
    raw.once("close", done);
  });
}

/** 408 for a body that did not arrive in time; the connection is closed after it. */
export function bodyTimedOut(ms: number): AppError {
  return new AppError("invalid_parameter", {
    status: 408,
    message: `Timed out reading the request body: it did not arrive within ${Math.round(ms / 1000)} s.`,
    headers: { connection: "close" },
  });
}

/** Calls `onTimeout` if the body has not been read to its end within `ms`. */
export function watchBodyTime(raw: IncomingMessage, ms: number, onTimeout: () => void): void {
  if (!bodyPending(raw)) return;
  const timer = setTimeout(onTimeout, ms);
  timer.unref();
  const clear = () => clearTimeout(timer);
  raw.once("end", clear);
  raw.once("close", clear);
}
