import { createHash } from "node:crypto";
import { sql, type Kysely } from "kysely";
import { isPostgres } from "./dialect.ts";
import type { AuditTable, Database } from "./schema.ts";

/** The `prev_hash` of the first entry. */
export const genesisHash = "0".repeat(64);

/**
 * The PostgreSQL advisory lock every append takes for the rest of its transaction, so appends from several
 * replicas extend one chain in turn ("mgaudit" in ASCII; Kysely's migration lock uses another id).
 */
const chainLockId = "30794440740465012";

/** The fields of an entry the chain covers; `actor_id` and `actor_email` are absent from entries written before 0007. */
export type ChainedFields = Omit<AuditTable, "prev_hash" | "hash" | "actor_id" | "actor_email"> & Partial<Pick<AuditTable, "actor_id" | "actor_email">>;

/**
 * SHA-256 (hex) of an entry's canonical serialisation: a JSON array, in a fixed order, of a version tag, the
 * previous entry's hash and the entry's fields exactly as stored (`detail` is the stored JSON text, never parsed and
 * serialised again), so every dialect and every reader hashes the same bytes. An entry that names its user
 * (`actor_id` or `actor_email`) is version 2: the v1 array with the two appended. Entries without them keep the v1
 * bytes, so every entry chained before users existed verifies as it did; and an id or email removed from a v2 entry
 * changes its bytes all the same (its hash no longer matches).
 */
export function auditEntryHash(prevHash: string, f: ChainedFields): string {
  const v1 = [prevHash, Number(f.seq), f.id, f.at, f.actor, f.on_behalf_of, f.action, f.account_id, f.key_id, f.source, f.detail];
  const actorId = f.actor_id ?? null;
  const actorEmail = f.actor_email ?? null;
  const canonical = actorId === null && actorEmail === null ? JSON.stringify(["modelgate-audit-v1", ...v1]) : JSON.stringify(["modelgate-audit-v2", ...v1, actorId, actorEmail]);
  return createHash("sha256").update(canonical, "utf8").digest("hex");
}

/**
 * Appends one entry at the head of the chain, inside the caller's transaction. PostgreSQL: the advisory lock makes
 * concurrent appends (any replica, the CLI) wait for each other until their transactions end; SQLite: every write
 * transaction begins IMMEDIATE, which serialises writers the same way. `once`: no-op when an entry with this id is
 * already in the log (an entry another replica wrote first). Returns whether it appended.
 */
export async function appendChained(trx: Kysely<Database>, row: Omit<ChainedFields, "seq">, once = false): Promise<boolean> {
  if (isPostgres(trx)) await sql`SELECT pg_advisory_xact_lock(${sql.raw(chainLockId)})`.execute(trx);
  if (once && (await trx.selectFrom("audit_log").select("id").where("id", "=", row.id).executeTakeFirst())) return false;
  const head = await trx.selectFrom("audit_log").select(["seq", "hash"]).orderBy("seq", "desc").limit(1).executeTakeFirst();
  const fields: ChainedFields = { ...row, seq: head ? Number(head.seq) + 1 : 1 };
  const prevHash = head?.hash ?? genesisHash;
  await trx
    .insertInto("audit_log")
    .values({ ...fields, prev_hash: prevHash, hash: auditEntryHash(prevHash, fields) })
    .execute();
  return true;
}

export interface ChainBreak {
  seq: number | null;
  id: string;
  at: string;
  reason: string;
}

export interface ChainReport {
  /** Entries verified, from the first up to the head or the first break. */
  entries: number;
  /** The last entry verified: record it somewhere else to detect later rewrites of the whole chain from before it. */
  head: { seq: number; hash: string } | null;
  firstBreak: ChainBreak | null;
}

/** Walks the chain from the first entry in pages of `pageSize` and reports the first break. */
export async function verifyAuditChain(db: Kysely<Database>, pageSize = 1000): Promise<ChainReport> {
  let prevHash = genesisHash;
  let expected = 1;
  let head: ChainReport["head"] = null;
  const report = (firstBreak: ChainBreak | null): ChainReport => ({ entries: expected - 1, head, firstBreak });
  for (;;) {
    const rows = await db
      .selectFrom("audit_log")
      .selectAll()
      .where("seq", ">=", expected)
      .orderBy("seq")
      .limit(pageSize)
      .execute();
    for (const row of rows) {
      const seq = Number(row.seq);
      const at = { seq, id: row.id, at: row.at };
      if (seq !== expected) return report({ ...at, reason: `entry ${expected} is missing: entries were deleted or renumbered` });
      if (row.prev_hash !== prevHash) return report({ ...at, reason: `its prev_hash is not the hash of entry ${seq - 1}: an entry before it was changed` });
      if (auditEntryHash(row.prev_hash, row) !== row.hash) return report({ ...at, reason: "its fields do not match its hash: the entry was edited" });
      prevHash = row.hash;
      head = { seq, hash: row.hash };
      expected += 1;
    }
    if (rows.length < pageSize) break;
  }
  const outside = await db
    .selectFrom("audit_log")
    .select(["id", "at", "seq"])
    .where((eb) => eb.or([eb("seq", "is", null), eb("seq", "<", 1), eb("hash", "is", null)]))
    .limit(1)
    .executeTakeFirst();
  if (outside) return report({ seq: outside.seq === null ? null : Number(outside.seq), id: outside.id, at: outside.at, reason: "an entry outside the chain (no position or hash)" });
  return report(null);
}
