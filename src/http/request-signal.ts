import type { FastifyReply, FastifyRequest } from "fastify";

export class ClientDisconnected extends Error {
  constructor() {
    super("client disconnected");
    this.name = "ClientDisconnected";
  }
}

export class DeadlineExceeded extends Error {
  constructor(ms: number) {
    super(`request exceeded its ${ms} ms deadline`);
    this.name = "DeadlineExceeded";
  }
}

/**
 * One AbortController per request: it aborts when the client goes away before the response is complete,
 * or when the request's deadline passes. Engines get its signal and stop generating at once.
 */
export function requestSignal(request: FastifyRequest, reply: FastifyReply, deadlineMs: number): AbortSignal {
  const controller = new AbortController();
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
