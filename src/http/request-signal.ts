import type { FastifyReply, FastifyRequest } from "fastify";
import { ClientDisconnected, DeadlineExceeded } from "../errors/aborts.ts";

const controllers = new WeakMap<FastifyReply["raw"], AbortController>();

/** Stops the work behind a response the server itself has ended (a stream failed at shutdown): nobody reads it now. */
export function stopRequest(reply: FastifyReply): void {
  controllers.get(reply.raw)?.abort(new ClientDisconnected());
}

/**
 * One AbortController per request: it aborts when the client goes away before the response is complete,
 * or when the request's deadline passes. Engines get its signal and stop generating at once.
 */
export function requestSignal(request: FastifyRequest, reply: FastifyReply, deadlineMs: number): AbortSignal {
  const controller = new AbortController();
  controllers.set(reply.raw, controller);
  const timer = setTimeout(() => controller.abort(new DeadlineExceeded(deadlineMs)), deadlineMs);
  timer.unref();
  const onClose = () => {
    clearTimeout(timer);
    if (!reply.raw.writableFinished) controller.abort(new ClientDisconnected());
  };
  reply.raw.once("close", onClose);
  reply.raw.once("finish", () => clearTimeout(timer));
  return controller.signal;
}
