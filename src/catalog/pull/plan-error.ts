/** A pull that cannot be planned or written as asked (no such file on the hub, an unsafe name, a path outside models/). */
export class PlanError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PlanError";
  }
}
