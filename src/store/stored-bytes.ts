import { sql, type Kysely } from "kysely";
import { isPostgres } from "./dialect.ts";
import type { Database } from "./schema.ts";

/** The batch statuses whose lines are still kept for running: they count against the account's storage. */
export const runningBatchStatuses = ["validating", "in_progress", "cancelling", "finalizing"];

/** The first key of the PostgreSQL advisory locks that serialize one account's storage checks ("mgfi"). */
const storageLockClass = 0x6d676669;

/** The limits a plan sets on what one account stores (Batch API files and the lines of its running batches). */
export interface StorageLimits {
  maxStoredBytes: number;
  maxStoredFiles: number;
}

export interface StoredUsage {
  bytes: number;
  files: number;
}

/**
 * Takes the account's storage lock for the rest of the transaction, so that checks of its usage followed by a write
 * that adds to it run one at a time on every replica. SQLite transactions begin IMMEDIATE, so they are one at a time
 * already.
 */
export async function lockAccountStorage(trx: Kysely<Database>, accountId: string): Promise<void> {
  if (isPostgres(trx)) await sql`SELECT pg_advisory_xact_lock(${sql.lit(storageLockClass)}, hashtext(${accountId}))`.execute(trx);
}

/**
 * What the account stores at `now`: its files not expired (an upload under way by the bytes it reserved) and, for its
 * batches still running, their lines (a copy of their input files).
 */
export async function storedUsage(trx: Kysely<Database>, accountId: string, now: number): Promise<StoredUsage> {
  const files = await trx
    .selectFrom("files")
    .select((eb) => [eb.fn.coalesce(eb.fn.sum<number | string>("bytes"), eb.lit(0)).as("bytes"), eb.fn.countAll<number | string>().as("files")])
    .where("account_id", "=", accountId)
    .where((eb) => eb.or([eb("expires_at", "is", null), eb("expires_at", ">", now)]))
    .executeTakeFirstOrThrow();
  const lines = await trx
    .selectFrom("batches")
    .select((eb) => eb.fn.coalesce(eb.fn.sum<number | string>("line_bytes"), eb.lit(0)).as("bytes"))
    .where("account_id", "=", accountId)
    .where("status", "in", runningBatchStatuses)
    .executeTakeFirstOrThrow();
  return { bytes: Number(files.bytes) + Number(lines.bytes), files: Number(files.files) };
}
