/** Why a request's AbortSignal fired. Engines and the scheduler see these as the signal's reason. */

/** The client went away before the response was complete: nothing to answer, and nothing went wrong. */
export class ClientDisconnected extends Error {
  constructor() {
    super("client disconnected");
    this.name = "ClientDisconnected";
  }
}

/** The request's deadline (`requestTimeout`) passed. */
export class DeadlineExceeded extends Error {
  constructor(ms: number) {
    super(`request exceeded its ${ms} ms deadline`);
    this.name = "DeadlineExceeded";
  }
}

/**
 * The server stopped work that runs again later (a batch line of a node stopping, or of a batch another node took
 * over): nobody's choice but the server's, so nothing is charged for it.
 */
export class WorkRequeued extends Error {
  constructor() {
    super("the work was stopped to run again later");
    this.name = "WorkRequeued";
  }
}

/** True for an abort caused by the client going away, as thrown by engines, the scheduler or a stream read. */
export function isClientDisconnect(err: unknown): boolean {
  return err instanceof ClientDisconnected || (err instanceof Error && err.cause instanceof ClientDisconnected);
}
