import { randomBytes } from "node:crypto";
import type { IncomingMessage } from "node:http";
import fp from "fastify-plugin";
import { securityHeaders } from "../http/security-headers.ts";

const acceptableClientId = /^[A-Za-z0-9._:-]{1,128}$/;

/** This process's random half of every id it makes; the other half counts (ids are unique, not secret). */
const processPart = randomBytes(8).toString("hex");
let counter = 0;

/**
 * A new request id, for requests that have none (or whose client sent one that is not safe to echo): `req_` and
 * 32 hex digits, like a UUID without dashes, at a fraction of randomUUID's cost per request.
 */
export function newRequestId(): string {
  counter = (counter + 1) % Number.MAX_SAFE_INTEGER;
  return `req_${processPart}${counter.toString(16).padStart(16, "0")}`;
}

/** Fastify's genReqId: a client's x-request-id is echoed only when it is safe (decisions.md). */
export function requestIdFor(req: IncomingMessage): string {
  const given = req.headers["x-request-id"];
  return typeof given === "string" && acceptableClientId.test(given) ? given : newRequestId();
}

/**
 * Puts x-request-id and the security headers (HSTS) on every response, errors, 404s and streams included (streams
 * copy the reply's headers).
 */
export const requestIdPlugin = fp(
  async (app) => {
    app.addHook("onRequest", (request, reply, done) => {
      reply.header("x-request-id", request.id);
      reply.headers(securityHeaders);
      done();
    });
  },
  { name: "request-id" },
);
