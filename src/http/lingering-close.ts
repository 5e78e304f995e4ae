import type { Socket } from "node:net";
import { discardCapBytes, lingerMs } from "./request-body.ts";

/** A lingering connection closes once nothing has arrived for this long (nginx's `lingering_timeout`, shorter). */
const lingerQuietMs = 1000;

/**
 * Closes a connection whose request Node's parser refused, after the answer, without resetting it: closing while the
 * client is still sending its body would make the client drop the answer unread (EPIPE, a reset). The answer goes
 * out without ending the connection; what the client still sends is thrown away (the parser refuses each chunk
 * again, and reports it here); the connection ends when the client ends its side, when nothing has arrived for
 * `lingerQuietMs`, after `lingerMs` in all, or past `discardCapBytes`.
 */
export class LingeringClose {
  private discarded = 0;
  private quiet: NodeJS.Timeout | null = null;
  private deadline: NodeJS.Timeout | null = null;

  constructor(private readonly socket: Socket) {}

  /** Writes the answer, then lingers (or, `atOnce`, closes right after it: a client too slow to be waited for). */
  answer(response: string, atOnce: boolean): void {
    if (atOnce) {
      this.socket.end(response, () => this.socket.destroy());
      return;
    }
    this.socket.write(response);
    this.deadline = setTimeout(() => this.close(), lingerMs);
    this.deadline.unref();
    this.socket.once("end", () => this.close());
    this.socket.once("close", () => this.stopTimers());
    this.restartQuiet();
  }

  /** More bytes arrived after the refusal; they are dropped. */
  received(bytes: number): void {
    this.discarded += bytes;
    if (this.discarded > discardCapBytes) this.socket.destroy();
    else if (this.quiet) this.restartQuiet();
  }

  private restartQuiet(): void {
    if (this.quiet) clearTimeout(this.quiet);
    this.quiet = setTimeout(() => this.close(), lingerQuietMs);
    this.quiet.unref();
  }

  private stopTimers(): void {
    if (this.quiet) clearTimeout(this.quiet);
    if (this.deadline) clearTimeout(this.deadline);
  }

  private close(): void {
    this.stopTimers();
    if (!this.socket.destroyed) this.socket.end(() => this.socket.destroy());
  }
}
