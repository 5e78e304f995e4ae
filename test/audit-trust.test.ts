// test: alone (two replicas append at once: 20 PostgreSQL connections opened together, each within the pool's 1 s connect timeout)
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { sql } from "kysely";
import { Migrator } from "kysely/migration";
import pg from "pg";
import { createAccount, createKey, revokeKey, writePendingRevocations } from "../src/keys/lifecycle.ts";
import { RedisRevocationBus } from "../src/keys/revocation-bus.ts";
import { auditEntryHash } from "../src/store/audit-chain.ts";
import { migrationProvider } from "../src/store/migrations.ts";
import { connectDatabase, openStore } from "../src/store/store.ts";
import { testConfig } from "../harness/config.ts";
import { freshPostgres, freshPostgresBehindProxy, postgresAdminUrl, redisTestUrl, silentLogger } from "../harness/keys.ts";
import { runCli, tempDir } from "../harness/server.ts";

/** Issue 29.5 and 29.6: an audit log the serving role cannot rewrite, chained so that the owner cannot either unseen. */
const cli = { actor: "cli" as const };
const keySecret = "audit-trust-key-secret-0123456789";
const cleanups: (() => Promise<void> | void)[] = [];
after(async () => {
  for (const fn of cleanups.reverse()) await fn();
});

function withUser(url: string, user: string): string {
  const u = new URL(url);
  u.username = user;
  return u.toString();
}

async function query(url: string, text: string): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await client.query(text);
  } finally {
    await client.end();
  }
}

describe("PostgreSQL with an owner role for migrations and a serving role", () => {
  const suffix = randomBytes(4).toString("hex");
  const owner = `mg_owner_${suffix}`;
  const serving = `mg_app_${suffix}`;
  const dataDir = tempDir();
  let adminUrl: string;
  let ownerUrl: string;
  let servingUrl: string;
  let env: Record<string, string>;
  const config = () => testConfig({ dataDir, models: [], keySecret, database: { url: servingUrl, migrationUrl: ownerUrl } }, null);

  before(async () => {
    const db = await freshPostgres();
    adminUrl = db.url;
    ownerUrl = withUser(db.url, owner);
    servingUrl = withUser(db.url, serving);
    const database = new URL(db.url).pathname.slice(1);
    cleanups.push(async () => {
      await db.drop();
      await query(postgresAdminUrl, `DROP ROLE IF EXISTS ${owner}; DROP ROLE IF EXISTS ${serving}`);
      rmSync(dataDir, { recursive: true, force: true });
    });
    // As deploy/postgres/init-roles.sh sets them up: the owner owns the database (so its public schema), the
    // serving role may only connect.
    await query(adminUrl, `CREATE ROLE ${owner} LOGIN; CREATE ROLE ${serving} LOGIN; ALTER DATABASE ${database} OWNER TO ${owner}; REVOKE CREATE ON SCHEMA public FROM PUBLIC`);
    env = { DATABASE_URL: servingUrl, DATABASE_MIGRATION_URL: ownerUrl, MODELGATE_DATA_DIR: dataDir, MODELGATE_KEY_SECRET: keySecret };
  });

  test("issue 29.5 before `modelgate migrate`, the serving role refuses to start and names the command", async () => {
    await assert.rejects(openStore(config(), silentLogger()), /migration\(s\) pending \(0001_accounts_keys_usage, [\s\S]*Run `modelgate migrate` with database\.migrationUrl/);
    // Without a migrationUrl it tries, as one role does, and fails with the same advice rather than a bare error.
    const oneRole = testConfig({ dataDir, models: [], keySecret, database: { url: servingUrl } }, null);
    await assert.rejects(openStore(oneRole, silentLogger()), /cannot run the \d+ pending migration\(s\) \(permission denied[\s\S]*Run `modelgate migrate`/);
  });

  test("issue 29.5 `modelgate migrate` runs as the owner and grants the serving role INSERT and SELECT only on the audit log", async () => {
    const first = await runCli(["migrate", "--json"], env);
    assert.equal(first.code, 0, first.stderr);
    const report = JSON.parse(first.stdout) as { applied: string[]; owner: string; servingRole: string; warnings: string[] };
    assert.ok(report.applied.includes("0004_audit_chain"));
    assert.deepEqual([report.owner, report.servingRole, report.warnings], [owner, serving, []]);
    const again = await runCli(["migrate", "--json"], env);
    assert.deepEqual(JSON.parse(again.stdout).applied, [], "a second run has nothing to do");
    const privileges = await query(
      adminUrl,
      `SELECT p.privilege, has_table_privilege('${serving}', 'audit_log', p.privilege) AS granted
       FROM unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']) AS p(privilege)`,
    );
    assert.deepEqual(Object.fromEntries(privileges.rows.map((r) => [r.privilege, r.granted])), {
      SELECT: true,
      INSERT: true,
      UPDATE: false,
      DELETE: false,
      TRUNCATE: false,
      REFERENCES: false,
      TRIGGER: false,
    });
    const owners = await query(adminUrl, `SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'`);
    assert.deepEqual(owners.rows.map((r) => r.tableowner), [owner]);
  });

  test("issue 29.5 as the serving role, DISABLE TRIGGER, DROP TRIGGER, UPDATE, DELETE and TRUNCATE on audit_log all fail", async () => {
    const store = await openStore(config(), silentLogger());
    try {
      const account = await createAccount(store, config(), { name: "serving-role" }, cli);
      await createKey(store, { account: account.id }, cli);
      assert.equal((await store.audit.list({ account: account.id })).length, 2, "the serving role appends");
    } finally {
      await store.close();
    }
    const attempts: Record<string, string> = {
      "DISABLE TRIGGER": "ALTER TABLE audit_log DISABLE TRIGGER audit_log_append_only",
      "DISABLE TRIGGER ALL": "ALTER TABLE audit_log DISABLE TRIGGER ALL",
      "DROP TRIGGER": "DROP TRIGGER audit_log_append_only ON audit_log",
      UPDATE: "UPDATE audit_log SET source = '198.51.100.66'",
      DELETE: "DELETE FROM audit_log",
      TRUNCATE: "TRUNCATE audit_log",
      "DROP TABLE": "DROP TABLE audit_log",
    };
    for (const [name, statement] of Object.entries(attempts)) {
      await assert.rejects(query(servingUrl, statement), /must be owner|permission denied/, name);
    }
    assert.deepEqual((await query(servingUrl, "SELECT count(*)::int AS n FROM audit_log WHERE source = '198.51.100.66'")).rows, [{ n: 0 }]);
  });

  test("issue 29.5 appends from two replicas at once keep one valid chain", async () => {
    const [a, b] = [await openStore(config(), silentLogger()), await openStore(config(), silentLogger())];
    try {
      const before = (await a.audit.verify()).entries;
      await Promise.all(Array.from({ length: 40 }, (_, i) => createAccount(i % 2 ? a : b, config(), { name: `concurrent-${i}` }, cli)));
      const report = await a.audit.verify();
      assert.deepEqual([report.firstBreak, report.entries, report.head?.seq], [null, before + 40, before + 40]);
    } finally {
      await a.close();
      await b.close();
    }
  });

  test("issue 29.5 an entry edited as the owner is found by `modelgate audit verify` (exit 1, naming it); a chain rewritten after an anchor fails the anchor", async () => {
    const good = await runCli(["audit", "verify", "--json"], env);
    assert.equal(good.code, 0, good.stderr);
    const { entries, head } = JSON.parse(good.stdout) as { entries: number; head: { seq: number; hash: string } };
    assert.ok(entries >= 42);
    assert.equal(head.seq, entries);

    await query(ownerUrl, "ALTER TABLE audit_log DISABLE TRIGGER audit_log_append_only; UPDATE audit_log SET actor = 'console' WHERE seq = 3; ALTER TABLE audit_log ENABLE TRIGGER audit_log_append_only");
    const edited = await runCli(["audit", "verify", "--json"], env);
    assert.equal(edited.code, 1);
    const error = (JSON.parse(edited.stdout) as { error: { code: string; message: string } }).error;
    assert.equal(error.code, "audit_chain_broken");
    assert.match(error.message, /breaks at entry 3 \(aud_[^,]+, [^)]+\): its fields do not match its hash: the entry was edited; the 2 entries before it verify/);

    // An owner who also recomputes every hash from the edit on passes the walk, but not an anchor recorded before.
    const rows = (await query(ownerUrl, "SELECT * FROM audit_log ORDER BY seq")).rows;
    let prev = rows[1].hash as string;
    const updates = rows.slice(2).map((row) => {
      const hash = auditEntryHash(prev, row);
      const statement = `UPDATE audit_log SET prev_hash = '${prev}', hash = '${hash}' WHERE seq = ${row.seq}`;
      prev = hash;
      return statement;
    });
    await query(ownerUrl, ["ALTER TABLE audit_log DISABLE TRIGGER audit_log_append_only", ...updates, "ALTER TABLE audit_log ENABLE TRIGGER audit_log_append_only"].join(";"));
    assert.equal((await runCli(["audit", "verify"], env)).code, 0, "a fully rewritten chain is consistent");
    const anchored = await runCli(["audit", "verify", "--anchor", `${head.seq}:${head.hash}`], env);
    assert.equal(anchored.code, 1);
    assert.match(anchored.stderr, new RegExp(`does not hold the anchor ${head.seq}:${head.hash.slice(0, 12)}…; entry ${head.seq} hashes to [0-9a-f]{12}… now: the chain was rewritten`));
  });
});

for (const dialect of ["sqlite", "postgres"] as const) {
  test(`issue 29.5 (${dialect}) entries written before the chain existed are chained by its migration, oldest first`, async () => {
    const dataDir = tempDir();
    const db = dialect === "postgres" ? await freshPostgres() : null;
    try {
      const config = testConfig({ dataDir, models: [], keySecret, ...(db ? { database: { url: db.url } } : {}) }, null);
      const legacy = connectDatabase(config, config.databaseUrl, silentLogger()).db;
      try {
        const { error } = await new Migrator({ db: legacy, provider: migrationProvider }).migrateTo("0003_audit_log_no_truncate");
        assert.ifError(error);
        for (const [id, at] of [["aud_b", "2025-01-02T00:00:00.000Z"], ["aud_a", "2025-01-02T00:00:00.000Z"], ["aud_c", "2025-01-01T00:00:00.000Z"]]) {
          await sql`INSERT INTO audit_log (id, at, actor, action, detail) VALUES (${id}, ${at}, 'cli', 'account.create', '{"name":"old"}')`.execute(legacy);
        }
      } finally {
        await legacy.destroy();
      }
      const store = await openStore(config, silentLogger());
      try {
        const chained = await store.db.selectFrom("audit_log").select(["id", "seq"]).orderBy("seq").execute();
        assert.deepEqual(chained.map((r) => [r.id, Number(r.seq)]), [["aud_c", 1], ["aud_a", 2], ["aud_b", 3]]);
        await createAccount(store, config, { name: "after-the-chain" }, cli);
        const report = await store.audit.verify();
        assert.deepEqual([report.firstBreak, report.entries], [null, 4]);
        await assert.rejects(store.db.updateTable("audit_log").set({ actor: "console" }).execute(), /append-only/, "the triggers are back");
        // Whoever can lift the triggers (the owner; with SQLite, whoever can write the file) and deletes an entry:
        if (dialect === "sqlite") {
          await sql`DROP TRIGGER audit_log_no_delete`.execute(store.db);
          await sql`DELETE FROM audit_log WHERE seq = 2`.execute(store.db);
          const broken = await store.audit.verify();
          assert.deepEqual([broken.entries, broken.firstBreak?.seq, broken.firstBreak?.reason], [1, 3, "entry 2 is missing: entries were deleted or renumbered"]);
        }
      } finally {
        await store.close();
      }
    } finally {
      await db?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
}

test("issue 29.6 a revocation accepted during a database outage keeps its audit entries and writes them with the revocation when the database returns", async () => {
  const db = await freshPostgresBehindProxy();
  cleanups.push(() => db.close());
  const { proxy } = db;
  const dataDir = tempDir();
  cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
  const config = testConfig({ dataDir, models: [], keySecret, database: { url: db.url } }, null);
  const [a, b] = [await openStore(config, silentLogger()), await openStore(config, silentLogger())];
  cleanups.push(() => a.close(), () => b.close());
  const bus = await RedisRevocationBus.connect(redisTestUrl);
  cleanups.push(() => bus.close());
  const account = await createAccount(a, config, { name: "outage", contacts: ["ops@outage.example"] }, cli);
  const key = await createKey(a, { account: account.id }, cli);
  cleanups.push(async () => bus.clearPending(key.id, (await bus.pendingAudit()).filter((e) => e.keyId === key.id).map((e) => e.id)));

  proxy.cut("refuse");
  const support = { actor: "admin-token" as const, onBehalfOf: "ops@outage.example", source: "203.0.113.7" };
  const first = await revokeKey(a, key.id, support, bus);
  assert.equal(first.pending, true);
  const second = await revokeKey(b, key.id, { actor: "cli" as const, onBehalfOf: "mallory@evil.example", source: "local:ops@gw-2" }, bus);
  assert.equal(second.pending, true);
  assert.deepEqual((await bus.pendingAudit()).filter((e) => e.keyId === key.id).map((e) => e.source), ["203.0.113.7", "local:ops@gw-2"], "held with the revocation");
  await assert.rejects(writePendingRevocations(a, bus, silentLogger()), "nothing is written while the database is away");

  proxy.restore();
  // Two replicas write the held revocation at the same moment: the entries land once.
  await Promise.all([writePendingRevocations(a, bus, silentLogger()), writePendingRevocations(b, bus, silentLogger())]);
  const entries = (await a.audit.list({ account: account.id, action: "key.revoke" })).reverse();
  assert.deepEqual(
    entries.map((e) => [e.actor, e.onBehalfOf, e.source, e.keyId, e.at, e.detail]),
    [
      ["admin-token", "ops@outage.example", "203.0.113.7", key.id, first.revokedAt, { prefix: key.prefix, pending: true }],
      ["cli", null, "local:ops@gw-2", key.id, second.revokedAt, { prefix: key.prefix, pending: true, unverifiedOnBehalfOf: "mallory@evil.example" }],
    ],
  );
  assert.equal((await a.keys.get(key.id))?.revokedAt, first.revokedAt, "the first revocation's time is kept");
  assert.deepEqual((await bus.pendingAudit()).filter((e) => e.keyId === key.id), [], "cleared from Redis once written");
  assert.equal((await bus.pending()).has(key.id), false);
  assert.equal((await a.audit.verify()).firstBreak, null);
});
