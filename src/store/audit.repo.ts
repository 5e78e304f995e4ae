import type { Kysely } from "kysely";
import { appendChained, verifyAuditChain, type ChainReport } from "./audit-chain.ts";
import { atomically } from "./dialect.ts";
import type { Database } from "./schema.ts";

/**
 * The kind of actor. `member` and `operator` entries name the console user (`actorId`, `actorEmail`); `anonymous` is a
 * failed sign-in; `console` is the shared-token console of earlier versions (old entries only).
 */
export type AuditActor = "member" | "operator" | "cli" | "admin-token" | "anonymous" | "console";
export const auditActors: AuditActor[] = ["member", "operator", "cli", "admin-token", "anonymous", "console"];

export interface AuditEntry {
  id: string;
  at: string;
  actor: AuditActor;
  /** The member's or operator's user id; null for other actors. */
  actorId?: string | null;
  /** The member's or operator's email when the entry was written. */
  actorEmail?: string | null;
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
    actorId: row.actor_id ?? null,
    actorEmail: row.actor_email ?? null,
    onBehalfOf: row.on_behalf_of,
    action: row.action,
    accountId: row.account_id,
    keyId: row.key_id,
    source: row.source,
    detail: row.detail === null ? null : (JSON.parse(row.detail) as Record<string, unknown>),
  };
}

/**
 * The audit log: append and read, nothing else (the database refuses updates and deletes, and with a separate
 * owner role the serving role may only INSERT and SELECT). Every entry is chained to the one before it by a
 * SHA-256 hash (audit-chain.ts), so an edit made by whoever can bypass that is found by `verify`.
 */
export class AuditRepo {
  constructor(private readonly db: Kysely<Database>) {}

  /** Appends at the head of the chain, in the caller's transaction when the repo is bound to one. */
  async append(entry: AuditEntry): Promise<void> {
    await this.write(entry, false);
  }

  /** Appends unless an entry with this id is already in the log; returns whether it appended. */
  appendOnce(entry: AuditEntry): Promise<boolean> {
    return this.write(entry, true);
  }

  /** Walks the hash chain from the first entry and reports the first break. */
  verify(): Promise<ChainReport> {
    return verifyAuditChain(this.db);
  }

  /** The hash of entry `seq`, or null when there is none (to check an anchor recorded earlier). */
  async hashAt(seq: number): Promise<string | null> {
    return (await this.db.selectFrom("audit_log").select("hash").where("seq", "=", seq).executeTakeFirst())?.hash ?? null;
  }

  private write(entry: AuditEntry, once: boolean): Promise<boolean> {
    const row = {
      id: entry.id,
      at: entry.at,
      actor: entry.actor,
      ...(entry.actorId || entry.actorEmail ? { actor_id: entry.actorId ?? null, actor_email: entry.actorEmail ?? null } : {}),
      on_behalf_of: entry.onBehalfOf,
      action: entry.action,
      account_id: entry.accountId,
      key_id: entry.keyId,
      source: entry.source,
      detail: entry.detail === null ? null : JSON.stringify(entry.detail),
    };
    return atomically(this.db, (trx) => appendChained(trx, row, once));
  }

  /** Newest first; `account` is an account id. */
  async list(filter: AuditFilter = {}): Promise<AuditEntry[]> {
    let query = this.db.selectFrom("audit_log").selectAll();
    if (filter.account) query = query.where("account_id", "=", filter.account);
    if (filter.action) query = query.where("action", "=", filter.action);
    if (filter.actor) query = query.where("actor", "=", filter.actor);
    // Entries of the same millisecond in the order they were appended.
    const rows = await query.orderBy("at", "desc").orderBy("seq", "desc").limit(filter.limit ?? 500).execute();
    return rows.map(toEntry);
  }
}
