import { sql, type Kysely } from "kysely";
import type { Migration, MigrationProvider } from "kysely/migration";
import { auditEntryHash, genesisHash, type ChainedFields } from "./audit-chain.ts";
import { atomically, isPostgres } from "./dialect.ts";

/**
 * The one migration set for SQLite and PostgreSQL: only types both understand (text, bigint), timestamps as
 * ISO text, JSON as text.
 */
const migrations: Record<string, Migration> = {
  "0001_accounts_keys_usage": {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable("accounts")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("name", "text", (c) => c.notNull().unique())
        .addColumn("plan", "text", (c) => c.notNull())
        .addColumn("allow_ips", "text", (c) => c.notNull().defaultTo("[]"))
        .addColumn("contacts", "text", (c) => c.notNull().defaultTo("[]"))
        .addColumn("created_at", "text", (c) => c.notNull())
        .execute();
      await db.schema
        .createTable("api_keys")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("account_id", "text", (c) => c.notNull().references("accounts.id"))
        .addColumn("prefix", "text", (c) => c.notNull())
        .addColumn("hash", "text", (c) => c.notNull().unique())
        .addColumn("name", "text")
        .addColumn("models", "text")
        .addColumn("endpoints", "text")
        .addColumn("deployment", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("last_used_at", "text")
        .addColumn("revoked_at", "text")
        .execute();
      await db.schema.createIndex("api_keys_account_idx").on("api_keys").column("account_id").execute();
      await db.schema
        .createTable("usage")
        .addColumn("key_id", "text", (c) => c.notNull())
        .addColumn("account_id", "text", (c) => c.notNull())
        .addColumn("model", "text", (c) => c.notNull())
        .addColumn("endpoint", "text", (c) => c.notNull())
        .addColumn("day", "text", (c) => c.notNull())
        .addColumn("requests", "bigint", (c) => c.notNull().defaultTo(0))
        .addColumn("prompt_tokens", "bigint", (c) => c.notNull().defaultTo(0))
        .addColumn("completion_tokens", "bigint", (c) => c.notNull().defaultTo(0))
        .addPrimaryKeyConstraint("usage_pk", ["key_id", "model", "endpoint", "day"])
        .execute();
      await db.schema.createIndex("usage_account_idx").on("usage").column("account_id").execute();
    },
    async down(db: Kysely<any>) {
      await db.schema.dropTable("usage").execute();
      await db.schema.dropTable("api_keys").execute();
      await db.schema.dropTable("accounts").execute();
    },
  },
  "0002_audit_log": {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable("audit_log")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("at", "text", (c) => c.notNull())
        .addColumn("actor", "text", (c) => c.notNull())
        .addColumn("on_behalf_of", "text")
        .addColumn("action", "text", (c) => c.notNull())
        .addColumn("account_id", "text")
        .addColumn("key_id", "text")
        .addColumn("source", "text")
        .addColumn("detail", "text")
        .execute();
      await db.schema.createIndex("audit_log_account_idx").on("audit_log").columns(["account_id", "at"]).execute();
      // Append-only in the database itself, whoever connects: updates and deletes fail.
      if (isPostgres(db)) {
        await sql`CREATE FUNCTION audit_log_append_only() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'audit_log is append-only'; END $$ LANGUAGE plpgsql`.execute(db);
        await sql`CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log FOR EACH ROW EXECUTE FUNCTION audit_log_append_only()`.execute(db);
      } else {
        await sql`CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END`.execute(db);
        await sql`CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END`.execute(db);
      }
    },
    async down() {
      throw new Error("the audit log is append-only: no down migration");
    },
  },
  "0003_audit_log_no_truncate": {
    // PostgreSQL's TRUNCATE empties a table without firing row triggers; SQLite has no TRUNCATE.
    async up(db: Kysely<any>) {
      if (!isPostgres(db)) return;
      await sql`CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only()`.execute(db);
    },
    async down() {
      throw new Error("the audit log is append-only: no down migration");
    },
  },
  "0004_audit_chain": {
    // Entries written before the chain are chained here, oldest first (by time, then id): from now on the chain
    // vouches for them as they stood at this migration (what happened to them before cannot be known).
    async up(db: Kysely<any>) {
      await atomically(db, async (trx) => {
        await trx.schema.alterTable("audit_log").addColumn("seq", "bigint").execute();
        await trx.schema.alterTable("audit_log").addColumn("prev_hash", "text").execute();
        await trx.schema.alterTable("audit_log").addColumn("hash", "text").execute();
        await chainExistingEntries(trx);
        await trx.schema.createIndex("audit_log_seq_idx").unique().on("audit_log").column("seq").execute();
        if (isPostgres(trx)) {
          await sql`ALTER TABLE audit_log ALTER COLUMN seq SET NOT NULL, ALTER COLUMN prev_hash SET NOT NULL, ALTER COLUMN hash SET NOT NULL`.execute(trx);
        } else {
          // SQLite cannot add NOT NULL to existing columns.
          await sql`CREATE TRIGGER audit_log_chained BEFORE INSERT ON audit_log WHEN NEW.seq IS NULL OR NEW.prev_hash IS NULL OR NEW.hash IS NULL BEGIN SELECT RAISE(ABORT, 'audit_log entries are chained: seq, prev_hash and hash are required'); END`.execute(trx);
        }
      });
    },
    async down() {
      throw new Error("the audit log is append-only: no down migration");
    },
  },
  "0005_store_meta": {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable("store_meta")
        .addColumn("name", "text", (c) => c.primaryKey())
        .addColumn("value", "text", (c) => c.notNull())
        .execute();
    },
    async down(db: Kysely<any>) {
      await db.schema.dropTable("store_meta").execute();
    },
  },
  "0006_usage_batches": {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable("usage_batches")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("written_at", "text", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("usage_batches_written_idx").on("usage_batches").column("written_at").execute();
    },
    async down(db: Kysely<any>) {
      await db.schema.dropTable("usage_batches").execute();
    },
  },
  "0007_console_users": {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable("users")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("email", "text", (c) => c.notNull().unique())
        .addColumn("account_id", "text", (c) => c.references("accounts.id"))
        .addColumn("role", "text", (c) => c.notNull())
        .addColumn("password_hash", "text")
        .addColumn("totp_secret", "text")
        .addColumn("totp_enabled_at", "text")
        .addColumn("totp_last_step", "bigint")
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("disabled_at", "text")
        .execute();
      await db.schema.createIndex("users_account_idx").on("users").column("account_id").execute();
      await db.schema
        .createTable("recovery_codes")
        .addColumn("user_id", "text", (c) => c.notNull().references("users.id"))
        .addColumn("hash", "text", (c) => c.notNull())
        .addColumn("used_at", "text")
        .addPrimaryKeyConstraint("recovery_codes_pk", ["user_id", "hash"])
        .execute();
      await db.schema
        .createTable("invites")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("token_hash", "text", (c) => c.notNull().unique())
        .addColumn("purpose", "text", (c) => c.notNull())
        .addColumn("email", "text", (c) => c.notNull())
        .addColumn("account_id", "text", (c) => c.references("accounts.id"))
        .addColumn("role", "text", (c) => c.notNull())
        .addColumn("created_by_id", "text")
        .addColumn("created_by_email", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("expires_at", "text", (c) => c.notNull())
        .addColumn("used_at", "text")
        .execute();
      await db.schema.createIndex("invites_account_idx").on("invites").column("account_id").execute();
      await db.schema
        .createTable("console_sessions")
        .addColumn("id_hash", "text", (c) => c.primaryKey())
        .addColumn("user_id", "text", (c) => c.notNull())
        .addColumn("csrf", "text", (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("last_seen_at", "text", (c) => c.notNull())
        .addColumn("expires_at", "text", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("console_sessions_user_idx").on("console_sessions").column("user_id").execute();
      // Who did it, for entries made by a console user: kind stays in `actor`; id and email join the chain's hash
      // (audit-chain.ts, version 2) for the entries that carry them.
      await db.schema.alterTable("audit_log").addColumn("actor_id", "text").execute();
      await db.schema.alterTable("audit_log").addColumn("actor_email", "text").execute();
    },
    async down() {
      throw new Error("the audit log is append-only: no down migration");
    },
  },
  "0008_account_budget": {
    async up(db: Kysely<any>) {
      // Issue 32: an account's own budget (JSON {amountMicros, period}), or null for its plan's.
      await db.schema.alterTable("accounts").addColumn("budget", "text").execute();
    },
    async down(db: Kysely<any>) {
      await db.schema.alterTable("accounts").dropColumn("budget").execute();
    },
  },
  "0009_batch_api": {
    async up(db: Kysely<any>) {
      // Bytes: bytea on PostgreSQL, blob on SQLite. A file is chunked rows (files.repo.ts says why not large objects).
      const bytes = isPostgres(db) ? "bytea" : "blob";
      await db.schema
        .createTable("files")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("account_id", "text", (c) => c.notNull())
        .addColumn("key_id", "text", (c) => c.notNull())
        .addColumn("purpose", "text", (c) => c.notNull())
        .addColumn("filename", "text", (c) => c.notNull())
        .addColumn("bytes", "bigint", (c) => c.notNull())
        .addColumn("created_at", "bigint", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("files_account_idx").on("files").columns(["account_id", "created_at"]).execute();
      await db.schema
        .createTable("file_chunks")
        .addColumn("file_id", "text", (c) => c.notNull())
        .addColumn("seq", "integer", (c) => c.notNull())
        .addColumn("data", sql.raw(bytes), (c) => c.notNull())
        .addPrimaryKeyConstraint("file_chunks_pk", ["file_id", "seq"])
        .execute();
      await db.schema
        .createTable("batches")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("account_id", "text", (c) => c.notNull())
        .addColumn("key_id", "text", (c) => c.notNull())
        .addColumn("endpoint", "text", (c) => c.notNull())
        .addColumn("input_file_id", "text", (c) => c.notNull())
        .addColumn("completion_window", "text", (c) => c.notNull())
        .addColumn("status", "text", (c) => c.notNull())
        .addColumn("metadata", "text")
        .addColumn("errors", "text")
        .addColumn("output_file_id", "text")
        .addColumn("error_file_id", "text")
        .addColumn("total", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("completed", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("failed", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("concurrency", "integer", (c) => c.notNull().defaultTo(1))
        .addColumn("created_at", "bigint", (c) => c.notNull())
        .addColumn("in_progress_at", "bigint")
        .addColumn("expires_at", "bigint", (c) => c.notNull())
        .addColumn("finalizing_at", "bigint")
        .addColumn("completed_at", "bigint")
        .addColumn("failed_at", "bigint")
        .addColumn("expired_at", "bigint")
        .addColumn("cancelling_at", "bigint")
        .addColumn("cancelled_at", "bigint")
        // The lease: the node working the batch, until when (epoch ms); renewed while it works.
        .addColumn("lease_owner", "text")
        .addColumn("lease_expires_at", "bigint")
        .execute();
      await db.schema.createIndex("batches_account_idx").on("batches").columns(["account_id", "created_at"]).execute();
      await db.schema.createIndex("batches_status_idx").on("batches").column("status").execute();
      await db.schema
        .createTable("batch_lines")
        .addColumn("batch_id", "text", (c) => c.notNull())
        .addColumn("line", "integer", (c) => c.notNull())
        .addColumn("custom_id", "text", (c) => c.notNull())
        .addColumn("body", "text", (c) => c.notNull())
        // pending, then done (a result in `result`) or error (the result goes to the error file).
        .addColumn("state", "text", (c) => c.notNull())
        .addColumn("result", "text")
        .addPrimaryKeyConstraint("batch_lines_pk", ["batch_id", "line"])
        .execute();
      await db.schema.createIndex("batch_lines_state_idx").on("batch_lines").columns(["batch_id", "state"]).execute();
      // The share of a usage row that batch lines made (the row's totals include it).
      await db.schema.alterTable("usage").addColumn("batch_requests", "bigint", (c) => c.notNull().defaultTo(0)).execute();
      await db.schema.alterTable("usage").addColumn("batch_prompt_tokens", "bigint", (c) => c.notNull().defaultTo(0)).execute();
      await db.schema.alterTable("usage").addColumn("batch_completion_tokens", "bigint", (c) => c.notNull().defaultTo(0)).execute();
    },
    async down(db: Kysely<any>) {
      for (const table of ["batch_lines", "batches", "file_chunks", "files"]) await db.schema.dropTable(table).execute();
      for (const column of ["batch_requests", "batch_prompt_tokens", "batch_completion_tokens"]) await db.schema.alterTable("usage").dropColumn(column).execute();
    },
  },
  "0010_file_storage_limits": {
    async up(db: Kysely<any>) {
      // Issue 42.7: uploads stream into an `uploading` row that reserves its bytes; files expire; a batch's lines
      // count against its account's storage while it runs; a file keeps the validation errors batches got from it.
      await db.schema.alterTable("files").addColumn("status", "text", (c) => c.notNull().defaultTo("processed")).execute();
      await db.schema.alterTable("files").addColumn("expires_at", "bigint").execute();
      await db.schema.alterTable("files").addColumn("batch_errors", "text").execute();
      await db.schema.createIndex("files_expires_idx").on("files").column("expires_at").execute();
      await db.schema.alterTable("batches").addColumn("line_bytes", "bigint", (c) => c.notNull().defaultTo(0)).execute();
      await db.schema.alterTable("batches").addColumn("output_expires_after_ms", "bigint").execute();
      await db.schema.createIndex("batches_line_bytes_idx").on("batches").column("line_bytes").execute();
      // The batches made before: their lines count (and are reclaimed once they end) like a new batch's.
      await sql`UPDATE batches SET line_bytes = COALESCE((SELECT bytes FROM files WHERE files.id = batches.input_file_id), 1) WHERE total > 0`.execute(db);
    },
    async down(db: Kysely<any>) {
      await db.schema.dropIndex("files_expires_idx").execute();
      await db.schema.dropIndex("batches_line_bytes_idx").execute();
      for (const column of ["status", "expires_at", "batch_errors"]) await db.schema.alterTable("files").dropColumn(column).execute();
      for (const column of ["line_bytes", "output_expires_after_ms"]) await db.schema.alterTable("batches").dropColumn(column).execute();
      },
    },
  "0011_console_links_and_oidc_subjects": {
    async up(db: Kysely<any>) {
      // Issue 42.8: a reset link names its user by id (it used to find them by email when accepted); 42.9: a reset
      // that also clears TOTP (an operator's decision) says so.
      await db.schema.alterTable("invites").addColumn("user_id", "text").execute();
      await db.schema.alterTable("invites").addColumn("clears_totp", "bigint", (c) => c.notNull().defaultTo(0)).execute();
      await db.schema.createIndex("invites_user_idx").on("invites").column("user_id").execute();
      // Reset links made before could open whoever holds their email now: withdrawn (used_at set), ask for new ones.
      const at = new Date().toISOString();
      await db.updateTable("invites").set({ used_at: at }).where("purpose", "=", "reset").where("used_at", "is", null).execute();
      // Issue 42.10-11: an operator's link to the identity provider (issuer + subject), and where their role comes
      // from: `invite` (kept as stored) or `oidc` (decided by the provider at every sign-in).
      await db.schema.alterTable("users").addColumn("oidc_issuer", "text").execute();
      await db.schema.alterTable("users").addColumn("oidc_subject", "text").execute();
      await db.schema.alterTable("users").addColumn("provisioned_by", "text", (c) => c.notNull().defaultTo("invite")).execute();
      await db.schema.createIndex("users_oidc_subject_idx").on("users").columns(["oidc_issuer", "oidc_subject"]).unique().execute();
      // Operators made by an OpenID sign-in so far: the ones whose own operator.join entry says so.
      const joined = db.selectFrom("audit_log").select("actor_id").where("action", "=", "operator.join").where("detail", "like", '%"via":"oidc"%');
      await db.updateTable("users").set({ provisioned_by: "oidc" }).where("account_id", "is", null).where("id", "in", joined).execute();
    },
    async down(db: Kysely<any>) {
      await db.schema.dropIndex("users_oidc_subject_idx").execute();
      for (const column of ["oidc_issuer", "oidc_subject", "provisioned_by"]) await db.schema.alterTable("users").dropColumn(column).execute();
      await db.schema.dropIndex("invites_user_idx").execute();
      for (const column of ["user_id", "clears_totp"]) await db.schema.alterTable("invites").dropColumn(column).execute();
    },
  },
  "0013_usage_cached_requests": {
    async up(db: Kysely<any>) {
      // Issue 45: requests answered from the response cache, a share of the row's requests (its own column).
      await db.schema.alterTable("usage").addColumn("cached_requests", "bigint", (c) => c.notNull().defaultTo(0)).execute();
    },
    async down(db: Kysely<any>) {
      await db.schema.alterTable("usage").dropColumn("cached_requests").execute();
    },
  },
};

/** Gives the entries written before 0004 their place in the chain; the append-only triggers are lifted meanwhile. */
async function chainExistingEntries(trx: Kysely<any>): Promise<void> {
  const rows = (await trx.selectFrom("audit_log").selectAll().orderBy("at").orderBy("id").execute()) as ChainedFields[];
  if (rows.length === 0) return;
  const postgres = isPostgres(trx);
  if (postgres) await sql`ALTER TABLE audit_log DISABLE TRIGGER audit_log_append_only`.execute(trx);
  else await sql`DROP TRIGGER audit_log_no_update`.execute(trx);
  let prevHash = genesisHash;
  for (const [i, row] of rows.entries()) {
    const fields = { ...row, seq: i + 1 };
    const hash = auditEntryHash(prevHash, fields);
    await trx.updateTable("audit_log").set({ seq: fields.seq, prev_hash: prevHash, hash }).where("id", "=", row.id).execute();
    prevHash = hash;
  }
  if (postgres) await sql`ALTER TABLE audit_log ENABLE TRIGGER audit_log_append_only`.execute(trx);
  else await sql`CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END`.execute(trx);
}

export const migrationProvider: MigrationProvider = {
  async getMigrations() {
    return migrations;
  },
};
