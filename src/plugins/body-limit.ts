import { Transform, type Readable, type Writable } from "node:stream";
import type { IncomingMessage } from "node:http";
import type { FastifyReply, FastifyRequest } from "fastify";
import { AppError } from "../errors/app-error.ts";
import { bodyTimedOut, discardRest, watchBodyTime } from "../http/request-body.ts";
import { continueBody } from "./request-body-guard.ts";

declare module "fastify" {
  interface FastifyContextConfig {
    /** The body is a multipart upload: limited by maxUploadBytes instead of maxBodyBytes. */
    upload?: boolean;
    /** The upload is a Batch API file: limited by maxBatchFileBytes. */
    batchFile?: boolean;
  }
}

function tooLarge(limit: number, upload: boolean): AppError {
  const what = upload ? "upload" : "request body";
  return new AppError("request_too_large", { message: `The ${what} exceeds this plan's limit of ${limit} bytes.` });
}

/** Counts JSON body bytes as Fastify reads them; fails the read past the limit without buffering more. */
function countingStream(payload: Readable, limit: number, onExceed: () => AppError): Transform {
  let received = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      received += chunk.length;
      (counter as Transform & { receivedEncodedLength: number }).receivedEncodedLength = received;
      if (received > limit) {
        payload.unpipe(counter);
        callback(onExceed());
        return;
      }
      callback(null, chunk);
    },
  });
  // pipe() does not forward errors: a client that goes away mid-body must fail the read, not leave it hanging.
  payload.once("error", (err) => counter.destroy(err));
  payload.once("aborted", () => counter.destroy(Object.assign(new Error("request aborted"), { statusCode: 400 })));
  payload.pipe(counter);
  return counter;
}

/**
 * Fails the read of a JSON body with `error` (Fastify's reader listens for 'error' on the stream it reads; its
 * error handler answers). With no reader left (the answer went without reading the body), the rest is discarded.
 */
function failRead(raw: IncomingMessage, error: AppError): void {
  if (raw.listenerCount("error") > 0) raw.emit("error", error);
  else discardRest(raw);
}

/**
 * Multipart uploads are read by @fastify/multipart straight from request.raw, so the count watches raw 'data'
 * alongside the parser. Past the limit the parser is cut off with the 413 error, which the route's read rejects
 * with; the error handler answers it.
 */
function watchUpload(request: FastifyRequest, reply: FastifyReply, limit: number, timeoutMs: number): void {
  const raw = request.raw;
  let received = 0;
  /** Stops the parser reading the upload with `error` (the route's read rejects with it) and drops the rest. */
  const cut = (error: AppError) => {
    raw.off("data", onData);
    const pipes = ((raw as unknown as { _readableState: { pipes: Writable[] } })._readableState.pipes ?? []).slice();
    discardRest(raw);
    if (pipes.length > 0) for (const dest of pipes) dest.destroy(error);
    else if (!reply.sent) reply.send(error);
  };
  // Keep the stream paused: adding a 'data' listener must not start the flow before the parser pipes in.
  raw.pause();
  const onData = (chunk: Buffer) => {
    received += chunk.length;
    if (received > limit) cut(tooLarge(limit, true));
  };
  raw.on("data", onData);
  watchBodyTime(raw, timeoutMs, () => cut(bodyTimedOut(timeoutMs)));
}

/**
 * §8 size limits per plan, a preParsing hook the scopes install: maxBodyBytes for JSON, maxUploadBytes for routes
 * with `config.upload`. A JSON body with a Content-Length has exactly that many bytes (Node's parser reads no more
 * as the body), and one without is counted while it streams; a Content-Length already over the limit is refused
 * before reading (and before a client that sent `Expect: 100-continue` is told to send it). Requests without a key
 * (admin, unknown paths) use the default plan's limits.
 */
export function limitBody(request: FastifyRequest, reply: FastifyReply, payload: Readable, done: (err: Error | null, payload?: Readable) => void): void {
  done(null, request.method === "GET" || request.method === "HEAD" ? payload : limited(request, reply, payload));
}

function limited(request: FastifyRequest, reply: FastifyReply, payload: Readable): Readable {
  const config = request.server.ctx.config;
  const plan = request.auth?.plan ?? config.plans.get(config.defaultPlan)!;
  const routeConfig = request.routeOptions.config;
  const upload = routeConfig?.upload === true;
  const limit = upload ? (routeConfig?.batchFile === true ? plan.maxBatchFileBytes : plan.maxUploadBytes) : plan.maxBodyBytes;
  const declared = Number(request.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) {
    discardRest(request.raw);
    throw tooLarge(limit, upload);
  }
  const timeoutMs = config.server.bodyTimeoutMs;
  continueBody(reply);
  // A JSON body that is already here in full (a small request arrives with its headers) is measured as it stands:
  // nothing to count while it streams and no body time to watch, so no Transform stream per request.
  if (!upload && payload === request.raw && request.raw.complete) {
    if (request.raw.readableLength <= limit) return payload;
    discardRest(request.raw);
    throw tooLarge(limit, false);
  }
  if (upload) {
    watchUpload(request, reply, limit, timeoutMs);
    return payload;
  }
  // The parser reads exactly Content-Length bytes as the body (it refuses a second length, or one beside
  // Transfer-Encoding), so a declared length within the limit bounds the body: only its time is left to watch.
  // A body without one (chunked) is counted as it streams.
  if (Number.isFinite(declared) && payload === request.raw) {
    watchBodyTime(request.raw, timeoutMs, () => failRead(request.raw, bodyTimedOut(timeoutMs)));
    return payload;
  }
  const counter = countingStream(payload, limit, () => {
    discardRest(request.raw);
    return tooLarge(limit, false);
  });
  watchBodyTime(request.raw, timeoutMs, () => counter.destroy(bodyTimedOut(timeoutMs)));
  return counter;
}
