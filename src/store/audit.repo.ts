import type { Kysely } from "kysely";
import type { Database } from "./schema.ts";

export type AuditActor = "console" | "cli" | "admin-token";

export interface AuditEntry {
  id: string;
  at: string;
  actor: AuditActor;
  onBehalfOf: string | null;
  action: string;
  accountId: string | null;
  keyId: string | null;
  source: string | null;
  detail: Record<string, unknown> | null;
}

export interface AuditFilter {
  account?: string;
  action?: string;
  actor?: string;
  limit?: number;
}

type Row = Database["audit_log"];

function toEntry(row: Row): AuditEntry {
  return {
    id: row.id,
    at: row.at,
    actor: row.actor as AuditActor,
    onBehalfOf: row.on_behalf_of,
    action: row.action,
    accountId: row.account_id,
    keyId: row.key_id,
    source: row.source,
    detail: row.detail === null ? null : (JSON.parse(row.detail) as Record<string, unknown>),
  };
}

/** The audit log: append and read, nothing else (the database refuses updates and deletes). */
export class AuditRepo {
  constructor(private readonly db: Kysely<Database>) {}

  async append(entry: AuditEntry): Promise<void> {
    await this.db
      .insertInto("audit_log")
      .values({
        id: entry.id,
        at: entry.at,
        actor: entry.actor,
        on_behalf_of: entry.onBehalfOf,
        action: entry.action,
        account_id: entry.accountId,
        key_id: entry.keyId,
        source: entry.source,
        detail: entry.detail === null ? null : JSON.stringify(entry.detail),
      })
      .execute();
  }

  /** Newest first; `account` is an account id. */
  async list(filter: AuditFilter = {}): Promise<AuditEntry[]> {
    let query = this.db.selectFrom("audit_log").selectAll();
    if (filter.account) query = query.where("account_id", "=", filter.account);
    if (filter.action) query = query.where("action", "=", filter.action);
    if (filter.actor) query = query.where("actor", "=", filter.actor);
    const rows = await query.orderBy("at", "desc").orderBy("id", "desc").limit(filter.limit ?? 500).execute();
    return rows.map(toEntry);
  }
}
