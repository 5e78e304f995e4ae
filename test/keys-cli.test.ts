import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { hostname, userInfo } from "node:os";
import { modelsDir, runCli, startServer, tempDir, writeConfig, type TestServer } from "../harness/server.ts";
import { waitFor } from "./helpers/wait-for.ts";
import path from "node:path";

const rerankModel = path.join(modelsDir, "forged/bert-rerank-tiny.gguf");

describe("modelgate accounts | keys | usage against a running server's store", () => {
  const dir = tempDir();
  const raw = {
    dataDir: dir,
    models: [{ id: "bert-rerank", engine: "llama", source: rerankModel, capabilities: ["rerank"], threads: 1, parallel: 1 }],
    plans: { dedicated: { ipAllowlist: true } },
  };
  let configFile: string;
  let s: TestServer;
  const cli = async (...args: string[]) => {
    const r = await runCli([...args, "--config", configFile, "--json"]);
    return { code: r.code, json: JSON.parse(r.stdout || "null") as any, stderr: r.stderr };
  };

  before(async () => {
    configFile = writeConfig(dir, raw);
    s = await startServer(raw, { dataDir: dir });
  });
  after(async () => {
    await s?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("§3 accounts create/update/list and keys create/list/rotate/revoke print the documented shapes", async () => {
    const created = await cli("accounts", "create", "acme", "--plan", "dedicated", "--allow-ip", "127.0.0.1/32,2001:db8::/32", "--contact", "ops@acme.example");
    assert.equal(created.code, 0, created.stderr);
    assert.deepEqual(Object.keys(created.json).sort(), ["allowIps", "id", "name", "plan"]);
    assert.deepEqual([created.json.name, created.json.plan, created.json.allowIps], ["acme", "dedicated", ["127.0.0.1/32", "2001:db8::/32"]]);

    const refused = await cli("accounts", "create", "other", "--allow-ip", "10.0.0.0/8");
    assert.equal(refused.code, 1);
    assert.match(refused.json.error.message, /does not include IP allowlisting/);

    const key = await cli("keys", "create", "--account", "acme", "--name", "ci", "--endpoints", "rerank,models");
    assert.equal(key.code, 0, key.stderr);
    assert.deepEqual(Object.keys(key.json).sort(), ["account", "id", "key", "prefix"]);
    assert.equal(key.json.account, created.json.id);

    // The running server sees the new key on its very next request.
    const res = await s.post("/v1/rerank", { model: "bert-rerank", query: "capital of France", documents: ["Paris is the capital of France.", "The cat sat."] }, { key: key.json.key });
    assert.equal(res.status, 200, await res.clone().text());
    await res.arrayBuffer();
    await s.server.ctx.usage.flush();

    const usage = await cli("usage", "--account", "acme");
    assert.equal(usage.code, 0, usage.stderr);
    assert.equal(usage.json.length, 1);
    assert.deepEqual([usage.json[0].keyId, usage.json[0].model, usage.json[0].endpoint, usage.json[0].requests], [key.json.id, "bert-rerank", "rerank", 1]);
    assert.ok(usage.json[0].promptTokens > 0);

    const rotated = await cli("keys", "rotate", key.json.id);
    assert.deepEqual(Object.keys(rotated.json).sort(), ["account", "id", "key", "prefix"]);
    assert.notEqual(rotated.json.key, key.json.key);

    // last_used_at is written in batches, off the hot path.
    const listed = await waitFor(() => cli("keys", "list", "--account", "acme"), (l) => Boolean(l.json.find((k: any) => k.id === key.json.id)?.lastUsedAt), "last_used_at", 10_000);
    assert.equal(listed.json.length, 2);
    const old = listed.json.find((k: any) => k.id === key.json.id);
    assert.deepEqual([old.endpoints, old.name, old.revokedAt], [["rerank", "models"], "ci", null]);
    assert.ok(old.lastUsedAt, "last_used_at recorded");
    assert.ok(!JSON.stringify(listed.json).includes(key.json.key), "key values are never listed");
    const twin = listed.json.find((k: any) => k.id === rotated.json.id);
    assert.deepEqual(twin.endpoints, ["rerank", "models"]);

    const revoked = await cli("keys", "revoke", key.json.id);
    assert.deepEqual(Object.keys(revoked.json).sort(), ["id", "revokedAt"]);
    const updated = await cli("accounts", "update", "acme", "--allow-ip", "10.0.0.0/8");
    assert.deepEqual(updated.json.allowIps, ["10.0.0.0/8"]);
    const accounts = await cli("accounts", "list");
    assert.deepEqual(accounts.json.map((a: any) => [a.name, a.contacts]), [["acme", ["ops@acme.example"]]]);
    const missing = await cli("keys", "revoke", "key_doesnotexist");
    assert.equal(missing.code, 1);
    assert.equal(missing.json.error.code, "not_found");
  });
  test("--on-behalf-of must be a registered contact; `modelgate audit` lists the CLI's operations with the contact and the local user and host", async () => {
    const account = await cli("accounts", "create", "support-co", "--contact", "cto@support.example", "--on-behalf-of", "cto@support.example");
    assert.equal(account.code, 0, account.stderr);
    const refused = await cli("keys", "create", "--account", "support-co", "--on-behalf-of", "intruder@evil.example");
    assert.equal(refused.code, 1);
    assert.match(refused.json.error.message, /"intruder@evil\.example" is not a registered contact of account "support-co" \(registered: cto@support\.example\)/);
    const key = await cli("keys", "create", "--account", "support-co", "--on-behalf-of", "cto@support.example");
    assert.equal(key.code, 0, key.stderr);
    const revoked = await cli("keys", "revoke", key.json.id);
    assert.equal(revoked.code, 0, revoked.stderr);

    const audit = await cli("audit", "--account", "support-co");
    assert.equal(audit.code, 0, audit.stderr);
    assert.deepEqual(
      audit.json.map((e: { action: string; actor: string; onBehalfOf: string | null; keyId: string | null }) => [e.action, e.actor, e.onBehalfOf, e.keyId]),
      [
        ["key.revoke", "cli", null, key.json.id],
        ["key.create", "cli", "cto@support.example", key.json.id],
        ["account.create", "cli", "cto@support.example", null],
      ],
    );
    assert.ok(!JSON.stringify(audit.json).includes(key.json.key.slice(11)), "no key value in the audit log");
    for (const e of audit.json) assert.equal(e.source, `local:${userInfo().username}@${hostname()}`, "a CLI operation's source");
    const text = await runCli(["audit", "--account", "support-co", "--action", "key.create", "--config", configFile]);
    assert.match(text.stdout, /key\.create\s+\S+/);
    assert.doesNotMatch(text.stdout, /key\.revoke/);
  });
});
