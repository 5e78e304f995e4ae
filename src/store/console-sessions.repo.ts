import type { Kysely } from "kysely";
import type { Database } from "./schema.ts";

export interface SessionRecord {
  userId: string;
  csrf: string;
  createdAt: number;
  lastSeenAt: number;
  expiresAt: number;
}

type Row = Database["console_sessions"];

function toRecord(row: Row): SessionRecord {
  return { userId: row.user_id, csrf: row.csrf, createdAt: Date.parse(row.created_at), lastSeenAt: Date.parse(row.last_seen_at), expiresAt: Date.parse(row.expires_at) };
}

const iso = (ms: number) => new Date(ms).toISOString();

/** Console sessions in the database, by the SHA-256 of their id (auth/session-store.ts hashes). */
export class ConsoleSessionsRepo {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(idHash: string, s: SessionRecord): Promise<void> {
    await this.db
      .insertInto("console_sessions")
      .values({ id_hash: idHash, user_id: s.userId, csrf: s.csrf, created_at: iso(s.createdAt), last_seen_at: iso(s.lastSeenAt), expires_at: iso(s.expiresAt) })
      .execute();
  }

  async get(idHash: string): Promise<SessionRecord | null> {
    const row = await this.db.selectFrom("console_sessions").selectAll().where("id_hash", "=", idHash).executeTakeFirst();
    return row ? toRecord(row) : null;
  }

  async touch(idHash: string, at: number): Promise<void> {
    await this.db.updateTable("console_sessions").set({ last_seen_at: iso(at) }).where("id_hash", "=", idHash).execute();
  }

  async delete(idHash: string): Promise<void> {
    await this.db.deleteFrom("console_sessions").where("id_hash", "=", idHash).execute();
  }

  async deleteUser(userId: string): Promise<number> {
    const result = await this.db.deleteFrom("console_sessions").where("user_id", "=", userId).executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  /** Drops sessions past their absolute end or idle since before `idleBefore`. */
  async prune(now: number, idleBefore: number): Promise<void> {
    await this.db
      .deleteFrom("console_sessions")
      .where((eb) => eb.or([eb("expires_at", "<=", iso(now)), eb("last_seen_at", "<", iso(idleBefore))]))
      .execute();
  }
}
