import type { IncomingMessage } from "node:http";
import type { Socket } from "node:net";
import type { FastifyReply } from "fastify";
import fp from "fastify-plugin";
import { bodyPending, discardRest, lingerMs, untilBodyEnds } from "../http/request-body.ts";

const lingering = Symbol("lingering");
/** The client sent `Expect: 100-continue` and has not been told to send its body yet. */
const awaitingContinue = Symbol("awaitingContinue");

type ContinueRequest = IncomingMessage & { [awaitingContinue]?: boolean };

/**
 * Tells a client that sent `Expect: 100-continue` to send its body. The body checks (body-limit.ts) call it once
 * the request has passed every check that could refuse it, so a body that will be refused is never asked for.
 */
export function continueBody(reply: FastifyReply): void {
  const raw = reply.request.raw as ContinueRequest;
  if (!raw[awaitingContinue]) return;
  raw[awaitingContinue] = false;
  reply.raw.writeContinue();
}

/**
 * Closing a socket the client is still writing to resets the connection, and a reset makes the client drop our
 * answer unread. When Node closes the connection after an answer (the client sent `Connection: close`), the close
 * is put off until the rest of the body has arrived and been discarded (bounded by time here, by bytes in
 * `discardRest`): a lingering close.
 */
function lingerBeforeClose(socket: Socket, untilDone: () => Promise<void>): void {
  const marked = socket as Socket & { [lingering]?: boolean; destroySoon?: () => void };
  if (marked[lingering] || typeof marked.destroySoon !== "function") return;
  marked[lingering] = true;
  const close = marked.destroySoon.bind(socket);
  marked.destroySoon = () => void untilDone().then(close);
}

/**
 * What an answer given before its request body was read does with the rest of the body: it is read and thrown away
 * (bounded), and a connection that closes after the answer lingers until it is in. Returns true when the connection
 * must close at once instead: the client sent `Expect: 100-continue` and was never told to send its body. The onSend
 * hook below calls it for every answer in the route hooks; answers made outside them (a URL Fastify cannot route, an
 * unknown `Expect`) call it themselves (client-errors.ts).
 */
export function leaveUnreadBody(raw: IncomingMessage, status: number): boolean {
  const request = raw as ContinueRequest;
  if (!bodyPending(request)) return false;
  if (request[awaitingContinue]) return true;
  discardRest(request);
  // A body that timed out (408) is not worth waiting for: that connection closes at once.
  if (status !== 408) lingerBeforeClose(request.socket, () => untilBodyEnds(request, lingerMs));
  return false;
}

/**
 * Every answer given before its request body was read (a refusal, an unknown path, an unparsed content type) lets
 * the rest of the body be read and thrown away (bounded), so the next request on the connection is not stuck
 * behind it, and a connection that closes after the answer lingers until the body is in.
 *
 * A client that sent `Expect: 100-continue` gets `100 Continue` only from `continueBody`, not from Node as soon as
 * the headers arrive. Answered without it, such a client may send its body or not (RFC 9110 §10.1.1), so nothing
 * that follows on the connection can be trusted to be a request: the answer closes it at once.
 */
export const requestBodyGuardPlugin = fp(
  async (app) => {
    app.server.on("checkContinue", (req: ContinueRequest, res) => {
      req[awaitingContinue] = true;
      app.server.emit("request", req, res);
    });
    app.addHook("onSend", (request, reply, payload, done) => {
      if (leaveUnreadBody(request.raw, reply.statusCode)) reply.header("connection", "close");
      done(null, payload);
    });
  },
  { name: "request-body-guard" },
);
