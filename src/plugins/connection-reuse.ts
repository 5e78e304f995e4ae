import type { Socket } from "node:net";
import fp from "fastify-plugin";

const served = new WeakMap<Socket, number>();

/**
 * server.maxRequestsPerConnection: the answer to a keep-alive connection's last allowed request says Connection:
 * close, and Node closes the socket once it is sent. Node's own maxRequestsPerSocket only asks the client to close,
 * and answers a client that sends more anyway with a bare 503, outside the §7 envelope.
 */
export const connectionReusePlugin = fp(
  async (app, opts: { maxRequests: number }) => {
    app.addHook("onRequest", (request, reply, done) => {
      const socket = request.raw.socket;
      const count = (served.get(socket) ?? 0) + 1;
      served.set(socket, count);
      if (count >= opts.maxRequests) reply.header("connection", "close");
      done();
    });
  },
  { name: "connection-reuse" },
);
