import { mkdirSync } from "node:fs";
import path from "node:path";
import BetterSqlite3 from "better-sqlite3";
import type { FastifyBaseLogger } from "fastify";
import { CompiledQuery, Kysely, PostgresDialect, SqliteDialect, type Driver } from "kysely";
import type { AppConfig } from "../config/app-config.ts";
import { AccountsRepo } from "./accounts.repo.ts";
import { AuditRepo } from "./audit.repo.ts";
import { KeysRepo } from "./keys.repo.ts";
import { loadCheckedKeySecret } from "./checked-key-secret.ts";
import { prepareSchema } from "./schema-version.ts";
import { StoreHealth } from "./store-health.ts";
import type { Database } from "./schema.ts";
import { UsageRepo } from "./usage.repo.ts";
import { UsersRepo } from "./users.repo.ts";
import { InvitesRepo } from "./invites.repo.ts";
import { ConsoleSessionsRepo } from "./console-sessions.repo.ts";
import { FilesRepo } from "./files.repo.ts";
import { BatchesRepo } from "./batches.repo.ts";
import { BatchIntakeRepo } from "./batch-intake.repo.ts";

export interface Store {
  readonly dialect: "sqlite" | "postgres";
  readonly db: Kysely<Database>;
  readonly accounts: AccountsRepo;
  readonly keys: KeysRepo;
  readonly usage: UsageRepo;
  readonly audit: AuditRepo;
  /** Console users (members and operators), their invites and sessions. */
  readonly users: UsersRepo;
  readonly invites: InvitesRepo;
  readonly sessions: ConsoleSessionsRepo;
  /** The Batch API's files (chunked bytes) and batches (lines, results, leases). */
  readonly files: FilesRepo;
  readonly batches: BatchesRepo;
  /** A batch's creation (validating, page by page) and the reclaim of its lines once it ended. */
  readonly batchIntake: BatchIntakeRepo;
  /** Runs `fn` in one transaction over repos bound to it: all of its writes land, or none. */
  transaction<T>(fn: (tx: StoreTransaction) => Promise<T>): Promise<T>;
  /** HMAC secret for key hashes (config keySecret or <dataDir>/secret), checked against the database's check value. */
  readonly keySecret: Buffer;
  /** Whether the database answers; operations that must survive an outage run through it. */
  readonly health: StoreHealth;
  close(): Promise<void>;
}

/** The repos a transaction writes through. */
export type StoreTransaction = Pick<Store, "accounts" | "keys" | "audit" | "users" | "invites" | "sessions">;

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

/** SQLite transactions begin IMMEDIATE: a transaction that reads and then writes (the audit chain's head) holds the
 * write lock from its start, so writers in other processes (the CLI, a second server) wait instead of failing. */
class ImmediateSqliteDialect extends SqliteDialect {
  override createDriver(): Driver {
    const driver = super.createDriver();
    driver.beginTransaction = async (connection) => {
      await connection.executeQuery(CompiledQuery.raw("begin immediate"));
    };
    return driver;
  }
}

/** Connects to PostgreSQL at `url`, or to the SQLite file in the data dir when there is none; no migration. */
export function connectDatabase(config: AppConfig, url: string | null, log: FastifyBaseLogger): { db: Kysely<Database>; dialect: Store["dialect"] } {
  if (url) {
    // Kysely makes the pool at its first query: pg is loaded then, never on the embedded default.
    const pool = async () => {
      const { default: pg } = await import("pg");
      // Fail fast when the database is away (the default is to wait for a connection forever).
      const made = new pg.Pool({ connectionString: url, max: 10, connectionTimeoutMillis: 1000, query_timeout: 5000 });
      // A client losing its connection must not crash the process: an idle one is reported by the pool; one in use
      // emits "error" on itself (with no listener once checked out) besides failing its query, which reports it.
      made.on("error", (err) => log.warn({ err }, "postgres pool client error"));
      made.on("connect", (client) => client.on("error", (err) => log.debug({ err }, "postgres connection lost")));
      return made;
    };
    log.debug({ database: describeUrl(url) }, "store: postgres");
    return { db: new Kysely<Database>({ dialect: new PostgresDialect({ pool }) }), dialect: "postgres" };
  }
  mkdirSync(config.dataDir, { recursive: true });
  const file = sqlitePath(config);
  const sqlite = new BetterSqlite3(file);
  sqlite.pragma("journal_mode = WAL");
  // The CLI and the server write the same file; wait for each other's locks instead of failing.
  sqlite.pragma("busy_timeout = 5000");
  sqlite.pragma("foreign_keys = ON");
  sqlite.pragma("synchronous = NORMAL");
  log.debug({ file }, "store: sqlite");
  return { db: new Kysely<Database>({ dialect: new ImmediateSqliteDialect({ database: sqlite }) }), dialect: "sqlite" };
}

export interface OpenStoreOptions {
  /** false for commands that never hash a key (`modelgate audit`): the key secret is neither needed nor checked. */
  keySecret?: boolean;
}

/**
 * Opens SQLite (WAL) in the data dir, or PostgreSQL when config.databaseUrl is set; brings the schema up to date (or
 * refuses, see prepareSchema) and loads the key secret, checked against the database.
 */
export async function openStore(config: AppConfig, log: FastifyBaseLogger, options: OpenStoreOptions = {}): Promise<Store> {
  const { db, dialect } = connectDatabase(config, config.databaseUrl, log);
  let keySecret: Buffer | null = null;
  try {
    await prepareSchema(db, config, log);
    if (options.keySecret !== false) keySecret = await loadCheckedKeySecret(config, db, dialect);
  } catch (err) {
    await db.destroy();
    throw err;
  }

  return {
    dialect,
    db,
    accounts: new AccountsRepo(db),
    keys: new KeysRepo(db),
    usage: new UsageRepo(db),
    audit: new AuditRepo(db),
    users: new UsersRepo(db),
    invites: new InvitesRepo(db),
    sessions: new ConsoleSessionsRepo(db),
    files: new FilesRepo(db),
    batches: new BatchesRepo(db),
    batchIntake: new BatchIntakeRepo(db),
    transaction: (fn) =>
      db.transaction().execute((trx) =>
        fn({ accounts: new AccountsRepo(trx), keys: new KeysRepo(trx), audit: new AuditRepo(trx), users: new UsersRepo(trx), invites: new InvitesRepo(trx), sessions: new ConsoleSessionsRepo(trx) }),
      ),
    get keySecret(): Buffer {
      if (!keySecret) throw new Error("this store was opened without the key secret");
      return keySecret;
    },
    health: new StoreHealth(log),
    close: () => db.destroy(),
  };
}
