import { sql, type Kysely } from "kysely";
import { batchRow, insertLines, type BatchError, type BatchLine, type BatchRecord } from "./batches.repo.ts";
import type { Database } from "./schema.ts";
import { lockAccountStorage, runningBatchStatuses, storedUsage, type StoredUsage } from "./stored-bytes.ts";

/** Lines deleted per statement when a batch's lines are reclaimed: a better-sqlite3 statement blocks the event loop. */
const linesPerDelete = 1000;

/**
 * A batch from its creation to `in_progress`, and the storage its lines take until it ends. The lines are added page
 * by page while the input file is read and checked (`validating`): no transaction stays open while the request
 * reads, and no node holds all the lines in memory. A node that dies mid-way leaves a `validating` batch that the
 * sweep fails later; the lines of a batch that ended are reclaimed by the sweep.
 */
export class BatchIntakeRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /**
   * The batch's row, `validating`, holding `lineBytes` of the account's storage while it runs, in one transaction
   * under the account's storage lock; refused (with the account's usage) when that would pass `maxBytes`.
   */
  async begin(batch: BatchRecord, lineBytes: number, maxBytes: number, now: number): Promise<{ refused: StoredUsage } | null> {
    return this.db.transaction().execute(async (trx) => {
      await lockAccountStorage(trx, batch.accountId);
      const usage = await storedUsage(trx, batch.accountId, now);
      if (usage.bytes + lineBytes > maxBytes) return { refused: usage };
      await trx.insertInto("batches").values(batchRow({ ...batch, status: "validating" }, lineBytes)).execute();
      return null;
    });
  }

  /** Adds checked lines to a batch still `validating`; false, adding nothing, when it is not (cancelled meanwhile). */
  async addLines(id: string, lines: BatchLine[]): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      const counted = await trx
        .updateTable("batches")
        .set({ total: sql<number>`total + ${lines.length}` })
        .where("id", "=", id)
        .where("status", "=", "validating")
        .executeTakeFirst();
      if (Number(counted.numUpdatedRows) === 0) return false;
      await insertLines(trx, id, lines);
      return true;
    });
  }

  /** validating → in_progress; false when the batch is not validating any more. */
  async accept(id: string, concurrency: number, now: number): Promise<boolean> {
    const done = await this.db
      .updateTable("batches")
      .set({ status: "in_progress", in_progress_at: now, concurrency })
      .where("id", "=", id)
      .where("status", "=", "validating")
      .executeTakeFirst();
    return Number(done.numUpdatedRows) === 1;
  }

  /** validating → failed with its errors (nothing runs); the lines added meanwhile are for reclaimLines. */
  async refuse(id: string, errors: BatchError[], now: number): Promise<void> {
    await this.db
      .updateTable("batches")
      .set({ status: "failed", failed_at: now, total: 0, errors: JSON.stringify(errors) })
      .where("id", "=", id)
      .where("status", "=", "validating")
      .execute();
  }

  /** Batches left `validating` since before `before` (the node checking them died): failed with `error`. */
  async refuseStale(before: number, error: BatchError, now: number): Promise<void> {
    await this.db
      .updateTable("batches")
      .set({ status: "failed", failed_at: now, total: 0, errors: JSON.stringify([error]) })
      .where("status", "=", "validating")
      .where("created_at", "<", before)
      .execute();
  }

  /** Batches that ended with their lines still kept (their results are in the output and error files by then). */
  async endedWithLines(limit: number): Promise<string[]> {
    const rows = await this.db.selectFrom("batches").select("id").where("line_bytes", ">", 0).where("status", "not in", runningBatchStatuses).limit(limit).execute();
    return rows.map((r) => r.id);
  }

  /** Deletes an ended batch's lines a page at a time, then releases the storage they held. */
  async reclaimLines(id: string): Promise<void> {
    const batch = await this.db.selectFrom("batches").select("status").where("id", "=", id).executeTakeFirst();
    if (!batch || runningBatchStatuses.includes(batch.status)) return;
    for (;;) {
      const next = await this.db.selectFrom("batch_lines").select("line").where("batch_id", "=", id).orderBy("line").offset(linesPerDelete - 1).limit(1).executeTakeFirst();
      if (!next) break;
      await this.db.deleteFrom("batch_lines").where("batch_id", "=", id).where("line", "<=", next.line).execute();
    }
    await this.db.deleteFrom("batch_lines").where("batch_id", "=", id).execute();
    await this.db.updateTable("batches").set({ line_bytes: 0 }).where("id", "=", id).where("status", "not in", runningBatchStatuses).execute();
  }
}
