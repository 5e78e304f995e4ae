import type { FastifyBaseLogger } from "fastify";
import type { BatchError } from "../../store/batches.repo.ts";
import type { Store } from "../../store/store.ts";

/** How often a node sweeps (every node does; the deletes are idempotent). */
const sweepIntervalMs = 60_000;
/** Files and batches reclaimed per pass of one sweep; the next sweep takes up the rest. */
const perPass = 100;
/** A batch still `validating` this long after its creation was left by a node that died. */
const staleValidationMs = 3_600_000;

const interrupted: BatchError = {
  code: "server_error",
  message: "The validation of this batch was interrupted (the server validating it stopped); create it again.",
  param: null,
  line: null,
};

/**
 * Reclaims the Batch API's storage: files past their `expires_at` (uploads whose node died among them), the lines
 * of batches that ended (their results are in the output and error files), and fails the batches left `validating`
 * by a node that died. Expired files are gone from listings and reads at once; the sweep gives their bytes back.
 */
export class StorageSweeper {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;

  constructor(
    private readonly store: Store,
    private readonly log: FastifyBaseLogger,
  ) {}

  start(): void {
    this.timer ??= setInterval(() => void this.sweep(), sweepIntervalMs).unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  /** One sweep (a sweep under way is joined, not doubled). */
  sweep(now = Date.now()): Promise<void> {
    this.running ??= this.pass(now)
      .catch((err) => this.log.warn({ err }, "storage sweep failed; the next one takes it up again"))
      .finally(() => (this.running = null));
    return this.running;
  }

  private async pass(now: number): Promise<void> {
    const { files, batchIntake } = this.store;
    await batchIntake.refuseStale(now - staleValidationMs, interrupted, now);
    for (const id of await files.expired(now, perPass)) await files.reclaim(id);
    for (const id of await batchIntake.endedWithLines(perPass)) await batchIntake.reclaimLines(id);
  }
}
