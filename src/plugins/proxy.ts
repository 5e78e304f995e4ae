import type { FastifyRequest } from "fastify";
import fp from "fastify-plugin";
import { AppError } from "../errors/app-error.ts";
import { IpAllowlist, normalizeIp } from "../auth/ip-allowlist.ts";

declare module "fastify" {
  interface FastifyRequest {
    /** The client's address: the socket peer, or X-Forwarded-For when the peer is a trusted proxy. */
    clientIp: string;
  }
}

/**
 * Works out the client's address. Only peers inside `trustProxy` may set X-Forwarded-For/-Proto; a trusted proxy
 * that forwarded a plain-HTTP request gets a 400, since the API is HTTPS-only.
 */
export const proxyPlugin = fp(
  async (app, opts: { trustProxy: string[] }) => {
    const trusted = new IpAllowlist(opts.trustProxy);
    app.decorateRequest("clientIp", "");
    app.addHook("onRequest", (request, _reply, done) => {
      done(forwardedClient(request));
    });
    /** Sets request.clientIp; the error when a trusted proxy forwarded plain HTTP. */
    function forwardedClient(request: FastifyRequest): AppError | undefined {
      const peer = normalizeIp(request.socket.remoteAddress ?? "");
      request.clientIp = peer;
      if (!trusted.allows(peer)) return undefined;
      const forwardedFor = request.headers["x-forwarded-for"];
      if (typeof forwardedFor === "string" && forwardedFor.trim()) {
        // Walk from the nearest hop back; the first address not itself a trusted proxy is the client.
        const hops = forwardedFor.split(",").map((h) => normalizeIp(h.trim())).filter(Boolean);
        let client = peer;
        for (let i = hops.length - 1; i >= 0; i--) {
          client = hops[i];
          if (!trusted.allows(client)) break;
        }
        request.clientIp = client;
      }
      const proto = request.headers["x-forwarded-proto"];
      if (typeof proto === "string" && proto.split(",")[0].trim().toLowerCase() !== "https") {
        return new AppError("invalid_parameter", { message: "This API is served over HTTPS only; the request reached the proxy over plain HTTP." });
      }
      return undefined;
    }
  },
  { name: "proxy" },
);
