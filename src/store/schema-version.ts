import type { FastifyBaseLogger } from "fastify";
import { sql, type Kysely } from "kysely";
import { Migrator } from "kysely/migration";
import type { AppConfig } from "../config/app-config.ts";
import { StoreStartError } from "./store-start-error.ts";
import { migrationProvider } from "./migrations.ts";
import type { Database } from "./schema.ts";

function migrator(db: Kysely<Database>): Migrator {
  return new Migrator({ db, provider: migrationProvider });
}

/** The migrations this version has that the database has not run yet (a read: any role that may SELECT can ask). */
export async function pendingMigrations(db: Kysely<Database>): Promise<string[]> {
  return (await migrator(db).getMigrations()).filter((m) => !m.executedAt).map((m) => m.name);
}

/** Runs the pending migrations (concurrent runners wait for each other); returns the names applied. */
export async function runMigrations(db: Kysely<Database>, log: FastifyBaseLogger): Promise<string[]> {
  const { error, results } = await migrator(db).migrateToLatest();
  const applied = (results ?? []).filter((r) => r.status === "Success").map((r) => r.migrationName);
  for (const migration of applied) log.info({ migration }, "store migration applied");
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return applied;
}

/**
 * What serve and the CLI do with the schema at open. With database.migrationUrl set (two roles), they never migrate:
 * a pending migration refuses the start, naming `modelgate migrate`. Without it (one role), they migrate as before;
 * a role that turns out not to own the schema gets the same advice instead of a bare permission error.
 */
export async function prepareSchema(db: Kysely<Database>, config: AppConfig, log: FastifyBaseLogger): Promise<void> {
  const pending = await pendingMigrations(db);
  if (pending.length === 0) return;
  const advice = "Run `modelgate migrate` with database.migrationUrl (DATABASE_MIGRATION_URL) set to the schema owner's URL, then start again.";
  if (config.databaseMigrationUrl) {
    throw new StoreStartError(`the database schema is behind this version of Modelgate: ${pending.length} migration(s) pending (${pending.join(", ")}). ${advice}`);
  }
  try {
    await runMigrations(db, log);
  } catch (err) {
    if ((err as { code?: string }).code !== "42501") throw err;
    throw new StoreStartError(`the database role cannot run the ${pending.length} pending migration(s) (${(err as Error).message}). ${advice}`);
  }
}

/**
 * What the serving role may do on each table when the migrations run as another role. The audit log takes INSERT
 * and SELECT only: without UPDATE, DELETE, TRUNCATE or ownership, the serving role can neither change an entry nor
 * lift the triggers that refuse it. Every table needs an entry here (grantServingRole refuses otherwise).
 */
export const servingPrivileges: Readonly<Record<string, string>> = {
  accounts: "SELECT, INSERT, UPDATE",
  api_keys: "SELECT, INSERT, UPDATE",
  usage: "SELECT, INSERT, UPDATE",
  usage_batches: "SELECT, INSERT, DELETE",
  store_meta: "SELECT, INSERT",
  audit_log: "SELECT, INSERT",
  // Console users are disabled, never deleted (their audit entries name them); codes and sessions come and go.
  users: "SELECT, INSERT, UPDATE",
  recovery_codes: "SELECT, INSERT, UPDATE, DELETE",
  invites: "SELECT, INSERT, UPDATE",
  console_sessions: "SELECT, INSERT, UPDATE, DELETE",
  // Batch API: files and batches are deleted by their owners; lines go with their batch.
  files: "SELECT, INSERT, UPDATE, DELETE",
  file_chunks: "SELECT, INSERT, DELETE",
  batches: "SELECT, INSERT, UPDATE, DELETE",
  batch_lines: "SELECT, INSERT, UPDATE, DELETE",
  kysely_migration: "SELECT",
  kysely_migration_lock: "SELECT",
};

/** Sets the serving role's privileges to exactly `servingPrivileges`, in one transaction (PostgreSQL, as the owner). */
export async function grantServingRole(db: Kysely<Database>, role: string): Promise<void> {
  // The schema the migrations created their tables in (search_path decides), not others sharing the database.
  const all = await db.introspection.getTables({ withInternalKyselyTables: true });
  const schema = all.find((t) => t.name === "kysely_migration")?.schema;
  const tables = all.filter((t) => t.schema === schema).map((t) => t.name);
  const missing = tables.filter((t) => !Object.hasOwn(servingPrivileges, t));
  if (missing.length > 0) throw new Error(`no serving-role privileges are defined for table(s) ${missing.join(", ")} (servingPrivileges)`);
  await db.transaction().execute(async (trx) => {
    for (const table of tables) {
      await sql`REVOKE ALL ON ${sql.table(table)} FROM ${sql.id(role)}`.execute(trx);
      await sql`GRANT ${sql.raw(servingPrivileges[table])} ON ${sql.table(table)} TO ${sql.id(role)}`.execute(trx);
    }
  });
}
