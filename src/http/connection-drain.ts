import type { Server } from "node:http";
import type { Socket } from "node:net";

/** How long a connection ended by the drain may stay half-open (the client not closing its side) before it is reset. */
const halfOpenMs = 2000;

/**
 * The shutdown's way of closing connections: each one ends (FIN, after what is still buffered is written) as soon as
 * no answer is in flight on it. Node's closeIdleConnections and closeAllConnections destroy the socket instead, which
 * can drop an answer's last bytes still buffered in TLS (a stream's final error event), and Node closes only the
 * connections idle when the shutdown begins: one draining a stream it keeps open after its answer until the
 * client's keep-alive lapses (72 s), and the process with it.
 */
export class ConnectionDrain {
  /** Every open connection, with how many answers are in flight on it. */
  private readonly inFlight = new Map<Socket, number>();
  private draining = false;

  /** `server` is the HTTPS server: its connections are reported once their TLS handshake is done. */
  constructor(server: Server) {
    server.on("secureConnection", (socket: Socket) => this.track(socket));
    server.on("request", (request, response) => {
      const socket: Socket = request.socket;
      if (!this.inFlight.has(socket)) {
        if (socket.destroyed) return;
        this.track(socket);
      }
      this.inFlight.set(socket, this.inFlight.get(socket)! + 1);
      response.once("close", () => {
        const count = this.inFlight.get(socket);
        if (count === undefined) return;
        this.inFlight.set(socket, count - 1);
        if (this.draining) this.endIfIdle(socket);
      });
    });
  }

  /** From now on every connection ends once its answers are out; the idle ones end now. */
  start(): void {
    this.draining = true;
    for (const socket of this.inFlight.keys()) this.endIfIdle(socket);
  }

  /** The shutdown's deadline: connections still answering are reset (their streams have had their error event). */
  resetBusy(): void {
    // On the next turn: an answer that has just finished reports its close on a tick of its own.
    setImmediate(() => {
      for (const [socket, count] of this.inFlight) if (count > 0) socket.destroy();
    });
  }

  private track(socket: Socket): void {
    this.inFlight.set(socket, 0);
    socket.once("close", () => this.inFlight.delete(socket));
  }

  private endIfIdle(socket: Socket): void {
    if (this.inFlight.get(socket) !== 0 || socket.writableEnded) return;
    socket.end();
    setTimeout(() => socket.destroy(), halfOpenMs).unref();
  }
}
