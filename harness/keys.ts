import { randomBytes } from "node:crypto";
import type { FastifyBaseLogger } from "fastify";
import pino from "pino";
import type { AppConfig } from "../src/config/app-config.ts";
import type { Endpoint } from "../src/config/config.schema.ts";
import { parseCidr } from "../src/config/cidr.ts";
import { createKey as createKeyRecord } from "../src/keys/lifecycle.ts";
import { newId } from "../src/keys/key-format.ts";
import { openStore } from "../src/store/store.ts";
import { SharedRedis } from "../src/plugins/rate-limit/shared-redis.ts";
import { TcpProxy } from "./tcp-proxy.ts";

export interface CreateKeyOptions {
  plan?: string;
  models?: string[];
  endpoints?: Endpoint[];
  deployment?: string | null;
  allowIps?: string[];
  /** Reuse an existing account (id or name) instead of creating one. */
  account?: string;
  /** The id of the account created (default: a random one), for a test whose outcome hangs on it (a route's sticky split). */
  accountId?: string;
}

export function silentLogger(): FastifyBaseLogger {
  return pino({ level: "silent" }) as unknown as FastifyBaseLogger;
}

/**
 * Opens the store the server uses (same data dir or database), creates a fresh account and a key on it, and
 * closes the store. The account is written directly so a test may put an allowlist on any plan.
 */
export async function createKey(config: AppConfig, opts: CreateKeyOptions = {}): Promise<{ key: string; id: string; accountId: string }> {
  const store = await openStore(config, silentLogger());
  try {
    let accountId = opts.account;
    if (!accountId) {
      const plan = opts.plan ?? config.defaultPlan;
      if (!config.plans.has(plan)) throw new Error(`createKey: unknown plan "${plan}"`);
      for (const c of opts.allowIps ?? []) if (!parseCidr(c)) throw new Error(`createKey: invalid CIDR "${c}"`);
      const account = await store.accounts.insert({
        id: opts.accountId ?? newId("acct"),
        name: `test-${randomBytes(6).toString("hex")}`,
        plan,
        allowIps: opts.allowIps ?? [],
        contacts: [],
        createdAt: new Date().toISOString(),
      });
      accountId = account.id;
    }
    const created = await createKeyRecord(store, {
      account: accountId,
      models: opts.models ?? null,
      endpoints: opts.endpoints ?? null,
      deployment: opts.deployment ?? null,
    }, { actor: "cli" });
    return { key: created.key, id: created.id, accountId: created.account };
  } finally {
    await store.close();
  }
}

export const postgresAdminUrl = process.env.TEST_POSTGRES_URL ?? "postgres://postgres@127.0.0.1:5432/test";
export const redisTestUrl = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

/** The limiters' Redis as a server connects it (its outage policy included), at `url`: a proxy's, to cut or slow it. */
export function sharedRedis(url = redisTestUrl, onError: "open" | "closed" = "open"): Promise<SharedRedis> {
  return SharedRedis.connect(url, { onError, log: silentLogger() });
}

/** A fresh PostgreSQL database for one test file, dropped by `drop()`. */
export async function freshPostgres(): Promise<{ url: string; drop(): Promise<void> }> {
  const { default: pg } = await import("pg");
  const name = `mg_test_${process.pid}_${randomBytes(4).toString("hex")}`;
  const admin = new pg.Client({ connectionString: postgresAdminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(postgresAdminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const client = new pg.Client({ connectionString: postgresAdminUrl });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}

/**
 * A fresh database reached through a TCP proxy the test can cut (an outage without stopping the shared PostgreSQL):
 * `url` goes through the proxy, `direct` does not. Its first connection (PostgreSQL loading a new database, slow on a
 * busy machine) is made here, not in the 1 s a server gives its own. `close` closes the proxy and drops the database.
 */
export async function freshPostgresBehindProxy(options: { onClientData?: (chunk: Buffer, connection: object) => void } = {}): Promise<{
  url: string;
  direct: string;
  proxy: TcpProxy;
  close(): Promise<void>;
}> {
  const { default: pg } = await import("pg");
  const db = await freshPostgres();
  const { proxy, url } = await TcpProxy.inFrontOf(db.url, options);
  const warm = new pg.Client({ connectionString: url });
  await warm.connect();
  await warm.query("select 1");
  await warm.end();
  return {
    url,
    direct: db.url,
    proxy,
    async close() {
      await proxy.close();
      await db.drop();
    },
  };
}
