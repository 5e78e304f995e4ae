import type { Kysely } from "kysely";
import type { Database } from "./schema.ts";

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

export interface FileRecord {
  id: string;
  accountId: string;
  keyId: string;
  purpose: string;
  filename: string;
  bytes: number;
  /** Epoch milliseconds. */
  createdAt: number;
}

type Row = Database["files"];

function toFile(row: Row): FileRecord {
  return {
    id: row.id,
    accountId: row.account_id,
    keyId: row.key_id,
    purpose: row.purpose,
    filename: row.filename,
    bytes: Number(row.bytes),
    createdAt: Number(row.created_at),
  };
}

export class FilesRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** Writes the file and its chunks in one transaction (or in the caller's). */
  async insert(file: FileRecord, content: Buffer): Promise<void> {
    const write = async (trx: Kysely<Database>) => {
      await trx
        .insertInto("files")
        .values({ id: file.id, account_id: file.accountId, key_id: file.keyId, purpose: file.purpose, filename: file.filename, bytes: file.bytes, created_at: file.createdAt })
        .execute();
      for (let seq = 0, at = 0; at < content.length || seq === 0; seq++, at += fileChunkBytes) {
        await trx.insertInto("file_chunks").values({ file_id: file.id, seq, data: content.subarray(at, at + fileChunkBytes) }).execute();
      }
    };
    if (this.db.isTransaction) await write(this.db);
    else await this.db.transaction().execute(write);
  }

  /** The account's file, or null (another account's file is not found either). */
  async get(accountId: string, id: string): Promise<FileRecord | null> {
    const row = await this.db.selectFrom("files").selectAll().where("id", "=", id).where("account_id", "=", accountId).executeTakeFirst();
    return row ? toFile(row) : null;
  }

  /** The account's files, newest first (or oldest with `order: asc`), after the file `after`. */
  async list(accountId: string, options: { limit: number; after?: string; order: "asc" | "desc"; purpose?: string }): Promise<FileRecord[]> {
    let query = this.db.selectFrom("files").selectAll().where("account_id", "=", accountId);
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

  /** The bytes, chunk by chunk (one chunk in memory at a time). */
  async *chunks(id: string): AsyncGenerator<Buffer> {
    for (let seq = 0; ; seq++) {
      const row = await this.db.selectFrom("file_chunks").select("data").where("file_id", "=", id).where("seq", "=", seq).executeTakeFirst();
      if (!row) return;
      yield Buffer.from(row.data);
    }
  }

  async content(id: string): Promise<Buffer> {
    const parts: Buffer[] = [];
    for await (const chunk of this.chunks(id)) parts.push(chunk);
    return Buffer.concat(parts);
  }

  /** Deletes the account's file and its bytes; false when it has no such file. */
  async delete(accountId: string, id: string): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      const deleted = await trx.deleteFrom("files").where("id", "=", id).where("account_id", "=", accountId).executeTakeFirst();
      if (Number(deleted.numDeletedRows) === 0) return false;
      await trx.deleteFrom("file_chunks").where("file_id", "=", id).execute();
      return true;
    });
  }
}
