import type { FastifyBaseLogger } from "fastify";
import { sql, type Kysely } from "kysely";
import type { AppConfig } from "../config/app-config.ts";
import { grantServingRole, runMigrations } from "./schema-version.ts";
import type { Database } from "./schema.ts";
import { connectDatabase } from "./store.ts";

export interface MigrationReport {
  dialect: "sqlite" | "postgres";
  /** Migrations applied by this run (none when the schema was already current). */
  applied: string[];
  /** The role that runs the migrations and owns the tables (PostgreSQL). */
  owner: string | null;
  /** The role of database.url, granted its privileges when it is not the owner (PostgreSQL). */
  servingRole: string | null;
  warnings: string[];
}

async function roleOf(db: Kysely<Database>): Promise<{ name: string; superuser: boolean }> {
  const { rows } = await sql<{ name: string; superuser: boolean }>`SELECT current_user AS name, rolsuper AS superuser FROM pg_roles WHERE rolname = current_user`.execute(db);
  return rows[0];
}

/**
 * `modelgate migrate`: runs the migrations as the owner role (database.migrationUrl, else database.url, else the
 * SQLite file), then gives the serving role (database.url) exactly the privileges it needs. Safe to run again.
 */
export async function migrateDatabase(config: AppConfig, log: FastifyBaseLogger): Promise<MigrationReport> {
  const ownerUrl = config.databaseMigrationUrl ?? config.databaseUrl;
  const { db, dialect } = connectDatabase(config, ownerUrl, log);
  try {
    const applied = await runMigrations(db, log);
    if (dialect === "sqlite") return { dialect, applied, owner: null, servingRole: null, warnings: [] };
    const owner = await roleOf(db);
    const warnings: string[] = [];
    let serving = owner;
    if (config.databaseMigrationUrl && config.databaseUrl) {
      const servingDb = connectDatabase(config, config.databaseUrl, log).db;
      try {
        serving = await roleOf(servingDb);
      } finally {
        await servingDb.destroy();
      }
      if (serving.name !== owner.name) await grantServingRole(db, serving.name);
    }
    if (serving.name === owner.name) {
      warnings.push(
        `the serving role "${serving.name}" owns the tables: it could lift the audit log's protections. ` +
          "Set database.migrationUrl (DATABASE_MIGRATION_URL) to an owner role and database.url to a role that does not own them.",
      );
    }
    if (serving.superuser) warnings.push(`the serving role "${serving.name}" is a superuser: nothing in the database can hold it; serve with a role without SUPERUSER.`);
    return { dialect, applied, owner: owner.name, servingRole: serving.name, warnings };
  } finally {
    await db.destroy();
  }
}
