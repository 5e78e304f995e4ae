import { PostgresAdapter, sql, type Kysely } from "kysely";
import type { Migration, MigrationProvider } from "kysely/migration";

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
      if (await isPostgres(db)) {
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
      if (!(await isPostgres(db))) return;
      await sql`CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only()`.execute(db);
    },
    async down() {
      throw new Error("the audit log is append-only: no down migration");
    },
  },
};

async function isPostgres(db: Kysely<any>): Promise<boolean> {
  return db.getExecutor().adapter instanceof PostgresAdapter;
}

export const migrationProvider: MigrationProvider = {
  async getMigrations() {
    return migrations;
  },
};
