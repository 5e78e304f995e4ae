import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import fp from "fastify-plugin";

const acceptableClientId = /^[A-Za-z0-9._:-]{1,128}$/;

/** Fastify's genReqId: a client's x-request-id is echoed only when it is safe (decisions.md). */
export function requestIdFor(req: IncomingMessage): string {
  const given = req.headers["x-request-id"];
  return typeof given === "string" && acceptableClientId.test(given) ? given : `req_${randomUUID().replace(/-/g, "")}`;
}

/** Puts x-request-id on every response, errors, 404s and streams included (streams copy reply headers). */
export const requestIdPlugin = fp(
  async (app) => {
    app.addHook("onRequest", async (request, reply) => {
      reply.header("x-request-id", request.id);
    });
  },
  { name: "request-id" },
);
