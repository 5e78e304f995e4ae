/** A reason the store refuses to open, worded as what to do about it; serve and the CLI print the message. */
export class StoreStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StoreStartError";
  }
}
