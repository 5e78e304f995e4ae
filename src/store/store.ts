import { mkdirSync } from "node:fs";
import path from "node:path";
import BetterSqlite3 from "better-sqlite3";
import type { FastifyBaseLogger } from "fastify";
import { Kysely, PostgresDialect, SqliteDialect } from "kysely";
import { Migrator } from "kysely/migration";
import pg from "pg";
import type { AppConfig } from "../config/app-config.ts";
import { loadKeySecret } from "../keys/key-secret.ts";
import { AccountsRepo } from "./accounts.repo.ts";
import { AuditRepo } from "./audit.repo.ts";
import { KeysRepo } from "./keys.repo.ts";
import { migrationProvider } from "./migrations.ts";
import { StoreHealth } from "./store-health.ts";
import type { Database } from "./schema.ts";
import { UsageRepo } from "./usage.repo.ts";

export interface Store {
  readonly dialect: "sqlite" | "postgres";
  readonly db: Kysely<Database>;
  readonly accounts: AccountsRepo;
  readonly keys: KeysRepo;
  readonly usage: UsageRepo;
  readonly audit: AuditRepo;
  /** Runs `fn` in one transaction over repos bound to it: all of its writes land, or none. */
  transaction<T>(fn: (tx: StoreTransaction) => Promise<T>): Promise<T>;
  /** HMAC secret for key hashes (config keySecret or <dataDir>/secret). */
  readonly keySecret: Buffer;
  /** Whether the database answers; operations that must survive an outage run through it. */
  readonly health: StoreHealth;
  close(): Promise<void>;
}

/** The repos a transaction writes through. */
export type StoreTransaction = Pick<Store, "accounts" | "keys" | "audit">;

/** Where the SQLite store lives when no database URL is configured. */
export function sqlitePath(config: AppConfig): string {
  return path.join(config.dataDir, "modelgate.db");
}

function describeUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return "postgres";
  }
}

/** Opens SQLite (WAL) in the data dir, or PostgreSQL when config.databaseUrl is set, and runs the migrations. */
export async function openStore(config: AppConfig, log: FastifyBaseLogger): Promise<Store> {
  let db: Kysely<Database>;
  let dialect: Store["dialect"];
  if (config.databaseUrl) {
    dialect = "postgres";
    // Fail fast when the database is away (the default is to wait for a connection forever).
    const pool = new pg.Pool({ connectionString: config.databaseUrl, max: 10, connectionTimeoutMillis: 1000, query_timeout: 5000 });
    // An idle client losing its connection must not crash the process.
    pool.on("error", (err) => log.warn({ err }, "postgres pool client error"));
    // Nor one in use: the pool listens only to idle clients, and pg emits "error" on a client whose connection is
    // lost (its query, if any, fails too and is handled by its caller).
    pool.on("connect", (client) => client.on("error", (err) => log.debug({ err }, "postgres connection lost")));
    db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    log.debug({ database: describeUrl(config.databaseUrl) }, "store: postgres");
  } else {
    dialect = "sqlite";
    mkdirSync(config.dataDir, { recursive: true });
    const file = sqlitePath(config);
    const sqlite = new BetterSqlite3(file);
    sqlite.pragma("journal_mode = WAL");
    // The CLI and the server write the same file; wait for each other's locks instead of failing.
    sqlite.pragma("busy_timeout = 5000");
    sqlite.pragma("foreign_keys = ON");
    sqlite.pragma("synchronous = NORMAL");
    db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
    log.debug({ file }, "store: sqlite");
  }

  try {
    const { error, results } = await new Migrator({ db, provider: migrationProvider }).migrateToLatest();
    for (const r of results ?? []) {
      if (r.status === "Success") log.info({ migration: r.migrationName }, "store migration applied");
    }
    if (error) throw error instanceof Error ? error : new Error(String(error));
  } catch (err) {
    await db.destroy();
    throw err;
  }

  const keySecret = loadKeySecret(config);
  return {
    dialect,
    db,
    accounts: new AccountsRepo(db),
    keys: new KeysRepo(db),
    usage: new UsageRepo(db),
    audit: new AuditRepo(db),
    transaction: (fn) => db.transaction().execute((trx) => fn({ accounts: new AccountsRepo(trx), keys: new KeysRepo(trx), audit: new AuditRepo(trx) })),
    keySecret,
    health: new StoreHealth(log),
    close: () => db.destroy(),
  };
}
