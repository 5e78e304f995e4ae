import { STATUS_CODES, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from "fastify";
import { AppError } from "../errors/app-error.ts";
import { retryHeaders, toEnvelope } from "../errors/envelope.ts";
import { normalizeIp } from "../auth/ip-allowlist.ts";
import { newRequestId } from "./request-id.ts";
import { securityHeaders } from "../http/security-headers.ts";
import { LingeringClose } from "../http/lingering-close.ts";
import { leaveUnreadBody } from "./request-body-guard.ts";

/**
 * Answers for requests that never reach a route, in the §7 envelope like every other answer, and always followed by
 * closing the connection (there is no request boundary left to trust), but not before what the client still sends
 * has been read and dropped (http/lingering-close.ts), so that it reads the answer instead of a reset:
 * - Node's HTTP parser refusing the bytes (bad framing, bad Content-Length, NUL in a header, unknown method): 400;
 * - headers or URL over Node's header size limit: 431 request_too_large;
 * - headers that did not arrive in time: 408.
 * They carry a fresh x-request-id and the anonymous limiter's headers (there is no key to limit by).
 */
function parserError(err: NodeJS.ErrnoException & { code?: string }): AppError {
  if (err.code === "HPE_HEADER_OVERFLOW") {
    return new AppError("request_too_large", { status: 431, message: "The request line and headers exceed the server's limit." });
  }
  if (err.code === "ERR_HTTP_REQUEST_TIMEOUT") {
    return new AppError("invalid_parameter", { status: 408, message: "Timed out waiting for the request line and headers." });
  }
  return new AppError("invalid_parameter", { message: `Malformed HTTP request (${err.code ?? "parse error"}).` });
}

function rawResponse(error: AppError, headers: Record<string, string>): string {
  const body = JSON.stringify(toEnvelope(error));
  const lines = {
    ...securityHeaders,
    ...headers,
    ...error.headers,
    ...(error.retryAfterMs !== undefined ? retryHeaders(error.retryAfterMs) : {}),
    "x-request-id": newRequestId(),
    "content-type": "application/json; charset=utf-8",
    "content-length": String(Buffer.byteLength(body)),
    connection: "close",
  };
  const head = Object.entries(lines).map(([name, value]) => `${name}: ${value}`).join("\r\n");
  return `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status]}\r\n${head}\r\n\r\n${body}`;
}

/** The connections `clientErrorHandler` refused, closing after their answer. */
const refused = new WeakMap<Socket, LingeringClose>();

/** Fastify's `clientErrorHandler`: Node emitted `clientError` on a connection. */
export function clientErrorHandler(this: FastifyInstance, err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === "ECONNRESET" || socket.destroyed) return;
  // What the client sends after a refusal is refused again by the parser, chunk by chunk: it is thrown away.
  const closing = refused.get(socket);
  if (closing) return closing.received((err as { rawPacket?: Buffer }).rawPacket?.length ?? 0);
  // As Node itself does: answer only if no byte of a response in flight has gone out yet (else the peer would
  // read a corrupted stream), then close (lingering).
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent: boolean } })._httpMessage;
  if (inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  const error = parserError(err);
  const lingering = new LingeringClose(socket);
  refused.set(socket, lingering);
  this.log.debug({ code: err.code, status: error.status }, "refused a request the HTTP parser could not read");
  const address = normalizeIp(socket.remoteAddress ?? "");
  void this.limits.anonymousHeaders(address).then(
    ({ headers }) => {
      // Headers that timed out (408) are not worth waiting for: that connection closes at once.
      if (socket.writable && !inFlight?.headersSent) lingering.answer(rawResponse(error, headers), err.code === "ERR_HTTP_REQUEST_TIMEOUT");
      else socket.destroy();
    },
    () => socket.destroy(),
  );
}

/**
 * Fastify's `frameworkErrors`: a URL it cannot route (bad percent-escape, overlong parameter). Fastify builds this
 * request on a context without hooks, so no onSend hook (the body guard's) runs: `sendClosing` does its part.
 */
export async function frameworkErrorHandler(err: Error & { code?: string }, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  request.clientIp = normalizeIp(request.socket.remoteAddress ?? "");
  const error = new AppError("invalid_parameter", { message: `The request URL cannot be read (${err.code ?? err.message}).` });
  try {
    await request.server.limits.anonymous(request, reply);
  } catch (limited) {
    return sendClosing(reply, limited as AppError);
  }
  return sendClosing(reply, error);
}

/**
 * Node's `checkExpectation` event: an `Expect` other than `100-continue`, which Node would refuse with a bare 417.
 * This 417 is the §7 envelope with a request id and the anonymous limiter's headers; the connection then closes, once
 * the body (never read) has been read and dropped.
 */
export function expectationFailed(app: FastifyInstance): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const error = new AppError("invalid_parameter", { status: 417, message: "The Expect header asks for something this server does not do; only 100-continue is supported." });
    const address = normalizeIp(req.socket.remoteAddress ?? "");
    void app.limits.anonymousHeaders(address).then(
      ({ headers }) => answer(headers),
      () => answer({}),
    );
    const answer = (headers: Record<string, string>) => {
      leaveUnreadBody(req, error.status);
      const body = JSON.stringify(toEnvelope(error));
      res.writeHead(error.status, {
        ...securityHeaders,
        ...headers,
        "x-request-id": newRequestId(),
        "content-type": "application/json; charset=utf-8",
        "content-length": String(Buffer.byteLength(body)),
        connection: "close",
      });
      res.end(body);
    };
  };
}

/**
 * An HTTP/1.1 request without Host (RFC 9112 §3.2 requires one): Node's own refusal (`requireHostHeader`) would be a
 * bare 400 with no envelope and no request id, so the server turns it off and this onRequest hook answers instead.
 */
export function refuseMissingHost(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
  if (request.headers.host !== undefined || request.raw.httpVersion !== "1.1") return done();
  // Answered here: the hook chain goes on (done) only if answering fails, so the error handler answers instead.
  answerMissingHost(request, reply).catch(done);
}

async function answerMissingHost(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const error = new AppError("invalid_parameter", { message: "The request has no Host header; HTTP/1.1 requires one." });
  try {
    await request.server.limits.anonymous(request, reply);
  } catch (limited) {
    sendClosing(reply, limited as AppError);
    return;
  }
  sendClosing(reply, error);
}

/** An answer that closes the connection; Fastify's own answers outside the route hooks come here too. */
function sendClosing(reply: FastifyReply, error: AppError): void {
  leaveUnreadBody(reply.request.raw, error.status);
  reply.code(error.status).headers({ ...securityHeaders, ...error.headers, connection: "close", "x-request-id": reply.request.id });
  if (error.retryAfterMs !== undefined) reply.headers(retryHeaders(error.retryAfterMs));
  void reply.type("application/json; charset=utf-8").send(toEnvelope(error));
}
