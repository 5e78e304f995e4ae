import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { sql } from "kysely";
import { testConfig } from "../harness/config.ts";
import type { AppConfig } from "../src/config/app-config.ts";
import { openStore } from "../src/store/store.ts";
import { UsageRecorder } from "../src/store/usage-recorder.ts";
import { LifecycleError, createAccount, createKey, listKeys, revokeKey, rotateKey, updateAccount } from "../src/keys/lifecycle.ts";
import { hashKey } from "../src/store/key-secret.ts";
import { freshPostgres, silentLogger } from "../harness/keys.ts";
import { tempDir } from "../harness/server.ts";

/** The audit context of operations made here (as the CLI makes them). */
const cli = { actor: "cli" as const };
const plans = { dedicated: { ipAllowlist: true, rateLimit: { requests: 5, window: "1s" } } };
const keySecret = "store-test-key-secret-0123456789";

async function configs(): Promise<{ name: string; config: AppConfig; cleanup(): Promise<void> }[]> {
  const dir = tempDir();
  const pgdb = await freshPostgres();
  return [
    { name: "sqlite", config: testConfig({ dataDir: dir, models: [], plans }, null), cleanup: async () => rmSync(dir, { recursive: true, force: true }) },
    { name: "postgres", config: testConfig({ dataDir: dir, models: [], plans, keySecret, database: { url: pgdb.url } }, null), cleanup: () => pgdb.drop() },
  ];
}

const all = await configs();
after(async () => {
  for (const c of all.reverse()) await c.cleanup();
});

for (const { name, config } of all) {
  describe(`store on ${name}`, () => {
    test("audit log: every key and account operation is recorded with its actor, on_behalf_of and never a key value; the log is append-only", async () => {
      const store = await openStore(config, silentLogger());
      try {
        const support = { actor: "admin-token" as const, onBehalfOf: "cto@audit.example", source: "203.0.113.9" };
        const account = await createAccount(store, config, { name: `audit-${name}`, contacts: ["cto@audit.example"] }, support);
        const key = await createKey(store, { account: account.id, name: "ci" }, { actor: "console", source: "127.0.0.1" });
        const rotated = await rotateKey(store, key.id, cli);
        await revokeKey(store, key.id, support);
        await updateAccount(store, config, account.id, { plan: "dedicated" }, { actor: "cli", onBehalfOf: "cto@audit.example" });
        await assert.rejects(createKey(store, { account: account.id }, { actor: "cli", onBehalfOf: "mallory@evil.example" }), /not a registered contact of account/);

        const entries = await store.audit.list({ account: account.id });
        assert.deepEqual(
          entries.map((e) => [e.action, e.actor, e.onBehalfOf, e.keyId, e.source]).reverse(),
          [
            ["account.create", "admin-token", "cto@audit.example", null, "203.0.113.9"],
            ["key.create", "console", null, key.id, "127.0.0.1"],
            ["key.rotate", "cli", null, rotated.id, null],
            ["key.revoke", "admin-token", "cto@audit.example", key.id, "203.0.113.9"],
            ["account.update", "cli", "cto@audit.example", null, null],
          ],
        );
        assert.deepEqual(entries.find((e) => e.action === "key.rotate")!.detail, {
          replaces: key.id,
          prefix: rotated.prefix,
          changes: { name: { from: null, to: "ci" }, models: { from: null, to: null }, endpoints: { from: null, to: null }, deployment: { from: null, to: null } },
        });
        const rows = JSON.stringify(await store.db.selectFrom("audit_log").selectAll().execute());
        for (const value of [key.key, rotated.key]) assert.ok(!rows.includes(value.slice(11)), "no key value in the audit log");

        // The refused create wrote neither a key nor an entry.
        assert.equal((await listKeys(store, account.id)).length, 2);
        await assert.rejects(store.db.updateTable("audit_log").set({ actor: "cli" }).where("account_id", "=", account.id).execute(), /append-only/);
        await assert.rejects(store.db.deleteFrom("audit_log").where("account_id", "=", account.id).execute(), /append-only/);
        if (name === "postgres") await assert.rejects(sql`TRUNCATE audit_log`.execute(store.db), /append-only/);
        assert.equal((await store.audit.list({ account: account.id })).length, 5);
      } finally {
        await store.close();
      }
    });

    test("migrations run once and are idempotent across opens", async () => {
      const a = await openStore(config, silentLogger());
      await a.close();
      const b = await openStore(config, silentLogger());
      assert.equal(b.dialect, name);
      await b.close();
      if (name === "sqlite") {
        const secret = statSync(path.join(config.dataDir, "secret"));
        assert.equal(secret.mode & 0o777, 0o600);
      }
    });

    test("§3 create, rotate, revoke: the key value is stored only as an HMAC", async () => {
      const store = await openStore(config, silentLogger());
      try {
        const account = await createAccount(store, config, { name: `acme-${name}`, plan: "dedicated", allowIps: ["10.0.0.0/8", "2001:db8::/32"], contacts: ["ops@acme.example"] }, cli);
        assert.deepEqual(account.allowIps, ["10.0.0.0/8", "2001:db8::/32"]);
        const key = await createKey(store, { account: account.name, models: ["qwen*"], endpoints: ["chat", "models"], deployment: "dedicated-a" }, cli);
        assert.match(key.key, /^mg_/);
        assert.equal(key.account, account.id);
        const raw = await store.db.selectFrom("api_keys").selectAll().where("id", "=", key.id).executeTakeFirstOrThrow();
        assert.equal(raw.hash, hashKey(store.keySecret, key.key));
        assert.ok(!Object.values(raw).some((v) => typeof v === "string" && v.includes(key.key.slice(11))), "key body never stored");

        const found = await store.keys.findByHash(hashKey(store.keySecret, key.key));
        assert.equal(found?.key.id, key.id);
        assert.deepEqual(found?.key.models, ["qwen*"]);
        assert.equal(found?.account.plan, "dedicated");

        const rotated = await rotateKey(store, key.id, cli);
        assert.notEqual(rotated.key, key.key);
        assert.deepEqual([rotated.models, rotated.endpoints, rotated.deployment, rotated.account], [["qwen*"], ["chat", "models"], "dedicated-a", account.id]);
        const keys = await listKeys(store, account.name);
        assert.deepEqual(keys.map((k) => k.revokedAt), [null, null], "old key stays active after rotation");

        const revoked = await revokeKey(store, key.id, cli);
        assert.ok(revoked.revokedAt);
        const again = await revokeKey(store, key.id, cli);
        assert.equal(again.revokedAt, revoked.revokedAt, "revocation is permanent and keeps its time");
        await assert.rejects(rotateKey(store, key.id, cli), LifecycleError);
      } finally {
        await store.close();
      }
    });

    test("account validation: unknown plan, bad CIDR, allowlist on a plan without it", async () => {
      const store = await openStore(config, silentLogger());
      try {
        await assert.rejects(createAccount(store, config, { name: `x-${name}`, plan: "nope" }, cli), /unknown plan/);
        await assert.rejects(createAccount(store, config, { name: `x-${name}`, plan: "dedicated", allowIps: ["10.0.0.0/40"] }, cli), /invalid CIDR/);
        await assert.rejects(createAccount(store, config, { name: `x-${name}`, allowIps: ["10.0.0.0/8"] }, cli), /does not include IP allowlisting/);
        const a = await createAccount(store, config, { name: `y-${name}` }, cli);
        assert.equal(a.plan, "default");
        await assert.rejects(createAccount(store, config, { name: `y-${name}` }, cli), /already exists/);
        const updated = await updateAccount(store, config, a.id, { plan: "dedicated", allowIps: ["192.0.2.0/24"] }, cli);
        assert.deepEqual([updated.plan, updated.allowIps], ["dedicated", ["192.0.2.0/24"]]);
        await assert.rejects(createKey(store, { account: a.id, endpoints: ["chat", "images"] }, cli), /unknown endpoint/);
      } finally {
        await store.close();
      }
    });

    test("issue 29.19 audit entries carry the old and new values of the fields an operation set or changed", async () => {
      const store = await openStore(config, silentLogger());
      try {
        const account = await createAccount(store, config, { name: `changes-${name}`, contacts: ["a@changes.example"] }, cli);
        const both = ["a@changes.example", "b@changes.example"];
        await updateAccount(store, config, account.id, { plan: "dedicated", allowIps: ["192.0.2.0/24"], contacts: both, name: `renamed-${name}` }, cli);
        await updateAccount(store, config, account.id, { plan: "dedicated" }, cli);
        const key = await createKey(store, { account: account.id, name: "ci", models: ["qwen*"], endpoints: ["chat"], deployment: "dedicated-a" }, cli);
        const entries = (await store.audit.list({ account: account.id })).reverse();
        assert.deepEqual(
          entries.map((e) => [e.action, e.detail]),
          [
            [
              "account.create",
              {
                name: `changes-${name}`,
                plan: "default",
                changes: { name: { from: null, to: `changes-${name}` }, plan: { from: null, to: "default" }, allowIps: { from: null, to: [] }, contacts: { from: null, to: ["a@changes.example"] } },
              },
            ],
            [
              "account.update",
              {
                changed: ["name", "plan", "allowIps", "contacts"],
                changes: {
                  name: { from: `changes-${name}`, to: `renamed-${name}` },
                  plan: { from: "default", to: "dedicated" },
                  allowIps: { from: [], to: ["192.0.2.0/24"] },
                  contacts: { from: ["a@changes.example"], to: both },
                },
              },
            ],
            ["account.update", { changed: [], changes: {} }],
            [
              "key.create",
              {
                prefix: key.prefix,
                name: "ci",
                changes: { name: { from: null, to: "ci" }, models: { from: null, to: ["qwen*"] }, endpoints: { from: null, to: ["chat"] }, deployment: { from: null, to: "dedicated-a" } },
              },
            ],
          ],
        );
      } finally {
        await store.close();
      }
    });

    test("issue 29.15 a usage batch written again after its acknowledgement was lost counts once", async () => {
      const store = await openStore(config, silentLogger());
      const recorder = new UsageRecorder(store, silentLogger());
      try {
        const account = await createAccount(store, config, { name: `replay-${name}` }, cli);
        const key = await createKey(store, { account: account.id }, cli);
        // The commit goes through, then the connection drops before its answer: to the recorder the database is away.
        const add = store.usage.add.bind(store.usage) as (...args: unknown[]) => Promise<unknown>;
        let loseAck = true;
        (store.usage as unknown as { add: (...args: unknown[]) => Promise<unknown> }).add = async (...args) => {
          const result = await add(...args);
          if (loseAck) {
            loseAck = false;
            throw new Error("Connection terminated unexpectedly");
          }
          return result;
        };
        for (let i = 0; i < 3; i++) recorder.record({ keyId: key.id, accountId: account.id, model: "m1", endpoint: "chat", promptTokens: 10, completionTokens: 5 });
        await recorder.flush();
        assert.equal(loseAck, false, "the first write committed and lost its acknowledgement");
        recorder.record({ keyId: key.id, accountId: account.id, model: "m1", endpoint: "chat", promptTokens: 1, completionTokens: 1 });
        await recorder.flush();
        const rows = await store.usage.summary(account.id);
        assert.deepEqual(
          rows.map((r) => [r.model, r.endpoint, r.requests, r.promptTokens, r.completionTokens]),
          [["m1", "chat", 4, 31, 16]],
        );
        const delta = { keyId: key.id, accountId: account.id, model: "m2", endpoint: "chat", day: "2026-01-01", requests: 1, promptTokens: 2, completionTokens: 3 };
        assert.equal(await store.usage.add("batch-replayed", [delta]), true);
        assert.equal(await store.usage.add("batch-replayed", [delta]), false, "a replayed batch id is a no-op");
        assert.deepEqual((await store.usage.summary(account.id)).find((r) => r.model === "m2")?.requests, 1);
      } finally {
        await recorder.close();
        await store.close();
      }
    });

    test("issue 29.8 a key secret other than the one the database's keys are hashed with refuses to start, saying what to do", async () => {
      const dataDir = tempDir();
      const db = name === "postgres" ? await freshPostgres() : null;
      const base = { dataDir, models: [], ...(db ? { database: { url: db.url } } : {}) };
      try {
        const original = testConfig({ ...base, keySecret: "the-original-secret-0123456789" }, null);
        const store = await openStore(original, silentLogger());
        const account = await createAccount(store, original, { name: `secret-${name}` }, cli);
        await createKey(store, { account: account.id }, cli);
        await store.close();
        await assert.rejects(
          openStore(testConfig({ ...base, keySecret: "another-secret-0123456789abcdef" }, null), silentLogger()),
          (err: Error) => /is not the one this database's API keys are hashed with/.test(err.message) && /MODELGATE_KEY_SECRET/.test(err.message) && /cannot be verified/.test(err.message),
        );
        if (db) await assert.rejects(openStore(testConfig(base, null), silentLogger()), /with PostgreSQL, set keySecret \(or MODELGATE_KEY_SECRET\)/);
        await (await openStore(original, silentLogger())).close();
      } finally {
        await db?.drop();
        rmSync(dataDir, { recursive: true, force: true });
      }
    });

    test("issue 29.8 a missing <dataDir>/secret is not generated again over a store that holds keys or a check value", { skip: name !== "sqlite" }, async () => {
      const dataDir = tempDir();
      const file = path.join(dataDir, "secret");
      try {
        const config = testConfig({ dataDir, models: [] }, null);
        await (await openStore(config, silentLogger())).close();
        const saved = readFileSync(file);
        rmSync(file);
        await assert.rejects(openStore(config, silentLogger()), /secret is missing, but this database holds API keys[\s\S]*MODELGATE_KEY_SECRET/);
        assert.ok(!existsSync(file), "no new secret was generated");
        writeFileSync(file, saved, { mode: 0o600 });
        const store = await openStore(config, silentLogger());
        const account = await createAccount(store, config, { name: "keeps-its-secret" }, cli);
        await createKey(store, { account: account.id }, cli);
        await store.close();
        rmSync(file);
        await assert.rejects(openStore(config, silentLogger()), /secret is missing/);
        assert.ok(!existsSync(file));
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    });

    test("usage is summed per key, model and endpoint in batches", async () => {
      const store = await openStore(config, silentLogger());
      const recorder = new UsageRecorder(store, silentLogger());
      try {
        const account = await createAccount(store, config, { name: `usage-${name}` }, cli);
        const key = await createKey(store, { account: account.id }, cli);
        for (let i = 0; i < 3; i++) recorder.record({ keyId: key.id, accountId: account.id, model: "m1", endpoint: "chat", promptTokens: 10, completionTokens: 5 });
        recorder.record({ keyId: key.id, accountId: account.id, model: "e1", endpoint: "embeddings", promptTokens: 7, completionTokens: 0 });
        await recorder.flush();
        recorder.record({ keyId: key.id, accountId: account.id, model: "m1", endpoint: "chat", promptTokens: 1, completionTokens: 1 });
        await recorder.flush();
        const rows = await store.usage.summary(account.id);
        assert.deepEqual(
          rows.map((r) => [r.model, r.endpoint, r.requests, r.promptTokens, r.completionTokens]),
          [
            ["e1", "embeddings", 1, 7, 0],
            ["m1", "chat", 4, 31, 16],
          ],
        );
      } finally {
        await recorder.close();
        await store.close();
      }
    });
  });
}
