import type { ExpressionBuilder, Insertable, Kysely, Selectable } from "kysely";
import type { Database } from "./schema.ts";
import { lockAccountStorage, storedUsage, type StorageLimits, type StoredUsage } from "./stored-bytes.ts";

/**
 * Batch API files live in the database, so every replica reads what any replica wrote: a `files` row and its bytes
 * as `file_chunks` rows of at most 1 MiB (bytea on PostgreSQL, blob on SQLite, whose file is in the data dir).
 *
 * Chunked bytea rather than PostgreSQL large objects: rows go with ordinary DELETEs and transactions (a large object
 * outlives its row unless unlinked, and needs vacuumlo otherwise), take the per-table GRANTs of the serving role
 * (servingPrivileges; large objects have their own ACLs), are copied by logical replication (large objects are not),
 * and need no lo_* calls, so the one code path works on SQLite too. 1 MiB chunks keep each row far below bytea's
 * 1 GB cap and let a download stream chunk by chunk. An S3-compatible store is the next step for larger files.
 */
export const fileChunkBytes = 1024 * 1024;

/** Chunks deleted per statement: a better-sqlite3 statement blocks the event loop while it runs. */
const chunksPerDelete = 8;

export interface FileRecord {
  id: string;
  accountId: string;
  keyId: string;
  purpose: string;
  filename: string;
  bytes: number;
  /** Epoch milliseconds, like expiresAt. */
  createdAt: number;
  /** When the file disappears from listings and reads (and is reclaimed); null: never. */
  expiresAt: number | null;
}

/** Why an upload may not start: the account already has its plan's most files, or no storage left. */
export type UploadRefusal = { refused: "files" | "bytes"; usage: StoredUsage };

type Row = Selectable<Database["files"]>;

function toFile(row: Row): FileRecord {
  return {
    id: row.id,
    accountId: row.account_id,
    keyId: row.key_id,
    purpose: row.purpose,
    filename: row.filename,
    bytes: Number(row.bytes),
    createdAt: Number(row.created_at),
    expiresAt: row.expires_at === null ? null : Number(row.expires_at),
  };
}

/** A file its owner can see at `now`: written to its end and not expired. */
const live = (now: number) => (eb: ExpressionBuilder<Database, "files">) =>
  eb.and([eb("status", "=", "processed"), eb.or([eb("expires_at", "is", null), eb("expires_at", ">", now)])]);

export class FilesRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** Writes a file made whole (a batch's output) and its chunks in one transaction (or in the caller's). */
  async insert(file: FileRecord, content: Buffer): Promise<void> {
    const write = async (trx: Kysely<Database>) => {
      await trx.insertInto("files").values(this.row(file, "processed")).execute();
      for (let seq = 0, at = 0; at < content.length || seq === 0; seq++, at += fileChunkBytes) {
        await trx.insertInto("file_chunks").values({ file_id: file.id, seq, data: content.subarray(at, at + fileChunkBytes) }).execute();
      }
    };
    if (this.db.isTransaction) await write(this.db);
    else await this.db.transaction().execute(write);
  }

  /**
   * Starts an upload within the account's limits: an `uploading` row (never listed or read) that reserves up to
   * `wanted` bytes of the account's storage, fewer when less is left. The check and the row are one transaction
   * under the account's storage lock, so uploads on every replica together stay within the limits. `file.expiresAt`
   * is the reservation's own end, for an upload whose node died: the sweep reclaims it then.
   */
  async beginUpload(file: Omit<FileRecord, "bytes">, wanted: number, limits: StorageLimits, now: number): Promise<{ reserved: number } | UploadRefusal> {
    return this.db.transaction().execute(async (trx) => {
      await lockAccountStorage(trx, file.accountId);
      const usage = await storedUsage(trx, file.accountId, now);
      if (usage.files >= limits.maxStoredFiles) return { refused: "files", usage };
      const reserved = Math.min(wanted, limits.maxStoredBytes - usage.bytes);
      if (reserved <= 0) return { refused: "bytes", usage };
      await trx.insertInto("files").values(this.row({ ...file, bytes: reserved }, "uploading")).execute();
      return { reserved };
    });
  }

  async writeChunk(fileId: string, seq: number, data: Uint8Array): Promise<void> {
    await this.db.insertInto("file_chunks").values({ file_id: fileId, seq, data }).execute();
  }

  /** Ends an upload: the file's real size, purpose and expiry; false when its row is gone (reclaimed meanwhile). */
  async finishUpload(fileId: string, fields: { bytes: number; purpose: string; expiresAt: number | null }): Promise<boolean> {
    const done = await this.db
      .updateTable("files")
      .set({ status: "processed", bytes: fields.bytes, purpose: fields.purpose, expires_at: fields.expiresAt })
      .where("id", "=", fileId)
      .where("status", "=", "uploading")
      .executeTakeFirst();
    return Number(done.numUpdatedRows) === 1;
  }

  /** The account's file, or null: another account's, an upload under way and an expired file are not found either. */
  async get(accountId: string, id: string, now = Date.now()): Promise<FileRecord | null> {
    const row = await this.db.selectFrom("files").selectAll().where("id", "=", id).where("account_id", "=", accountId).where(live(now)).executeTakeFirst();
    return row ? toFile(row) : null;
  }

  /** The account's files, newest first (or oldest with `order: asc`), after the file `after`. */
  async list(accountId: string, options: { limit: number; after?: string; order: "asc" | "desc"; purpose?: string }, now = Date.now()): Promise<FileRecord[]> {
    let query = this.db.selectFrom("files").selectAll().where("account_id", "=", accountId).where(live(now));
    if (options.purpose) query = query.where("purpose", "=", options.purpose);
    if (options.after) {
      const after = await this.db.selectFrom("files").select(["created_at", "id"]).where("id", "=", options.after).where("account_id", "=", accountId).executeTakeFirst();
      if (after) {
        const op = options.order === "asc" ? ">" : "<";
        query = query.where((eb) =>
          eb.or([eb("created_at", op, after.created_at), eb.and([eb("created_at", "=", after.created_at), eb("id", op, after.id)])]),
        );
      }
    }
    const rows = await query.orderBy("created_at", options.order).orderBy("id", options.order).limit(options.limit).execute();
    return rows.map(toFile);
  }

  /** The bytes, chunk by chunk (one chunk in memory at a time); they end early when the file was reclaimed meanwhile. */
  async *chunks(id: string): AsyncGenerator<Buffer> {
    for (let seq = 0; ; seq++) {
      const row = await this.db.selectFrom("file_chunks").select("data").where("file_id", "=", id).where("seq", "=", seq).executeTakeFirst();
      if (!row) return;
      // A view, not a copy: both drivers hand a Buffer already (and copying 100 MiB makes the GC work for it).
      yield Buffer.isBuffer(row.data) ? row.data : Buffer.from(row.data.buffer, row.data.byteOffset, row.data.byteLength);
    }
  }

  /** The validation errors a batch for `endpoint` got from this file, kept so that it is not read again; or null. */
  async keptErrors(id: string, endpoint: string): Promise<unknown[] | null> {
    const row = await this.db.selectFrom("files").select("batch_errors").where("id", "=", id).executeTakeFirst();
    const kept = row?.batch_errors ? (JSON.parse(row.batch_errors) as Record<string, unknown[]>) : {};
    return Object.hasOwn(kept, endpoint) ? kept[endpoint] : null;
  }

  async keepErrors(id: string, endpoint: string, errors: unknown[]): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      const row = await trx.selectFrom("files").select("batch_errors").where("id", "=", id).executeTakeFirst();
      if (!row) return;
      const kept = row.batch_errors ? (JSON.parse(row.batch_errors) as Record<string, unknown[]>) : {};
      await trx.updateTable("files").set({ batch_errors: JSON.stringify({ ...kept, [endpoint]: errors }) }).where("id", "=", id).execute();
    });
  }

  /**
   * Deletes the account's file: it expires now (gone from listings, reads and the account's usage at once), then its
   * bytes are reclaimed. False when the account has no such file.
   */
  async delete(accountId: string, id: string, now = Date.now()): Promise<boolean> {
    const gone = await this.db.updateTable("files").set({ expires_at: now }).where("id", "=", id).where("account_id", "=", accountId).where(live(now)).executeTakeFirst();
    if (Number(gone.numUpdatedRows) === 0) return false;
    await this.reclaim(id);
    return true;
  }

  /** Files expired at `now` (uploads whose node died included), at most `limit`, oldest expiry first. */
  async expired(now: number, limit: number): Promise<string[]> {
    const rows = await this.db.selectFrom("files").select("id").where("expires_at", "<=", now).orderBy("expires_at").limit(limit).execute();
    return rows.map((r) => r.id);
  }

  /**
   * Deletes a file's chunks a few at a time, then its row: a reclaim cut short leaves the row (expired, so never read)
   * for the next sweep to finish.
   */
  async reclaim(id: string): Promise<void> {
    for (;;) {
      const next = await this.db.selectFrom("file_chunks").select("seq").where("file_id", "=", id).orderBy("seq").offset(chunksPerDelete - 1).limit(1).executeTakeFirst();
      if (!next) break;
      await this.db.deleteFrom("file_chunks").where("file_id", "=", id).where("seq", "<=", next.seq).execute();
    }
    await this.db.deleteFrom("file_chunks").where("file_id", "=", id).execute();
    await this.db.deleteFrom("files").where("id", "=", id).execute();
  }

  private row(file: FileRecord, status: "uploading" | "processed"): Insertable<Database["files"]> {
    return {
      id: file.id,
      account_id: file.accountId,
      key_id: file.keyId,
      purpose: file.purpose,
      filename: file.filename,
      bytes: file.bytes,
      created_at: file.createdAt,
      status,
      expires_at: file.expiresAt,
      batch_errors: null,
    };
  }
}
