import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { revokeKey } from "../src/keys/lifecycle.ts";
import { displayPrefix, generateKey, newId } from "../src/keys/key-format.ts";
import { hashKey } from "../src/store/key-secret.ts";
import { openStore } from "../src/store/store.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { freshPostgres, silentLogger } from "../harness/keys.ts";
import { errorOf } from "./helpers/errors.ts";
import { until } from "./helpers/wait-for.ts";

const adminToken = "TSBPPyCCkIsCEyL-EoHUBPaTHtw8SshdCHP3KwOqYj8";
const models = [
  { id: "test-chat", engine: "llama", source: "/nonexistent/test-chat.gguf", capabilities: ["chat"], load: "lazy" },
  { id: "other-chat", engine: "llama", source: "/nonexistent/other-chat.gguf", capabilities: ["chat"], load: "lazy" },
];
const plans = {
  dedicated: { ipAllowlist: true },
  narrow: { models: ["test-*"], endpoints: ["models", "chat"] },
  // The revocation test polls as fast as it can for up to 1.5 s; 600/min would turn its last polls into 429s.
  polling: { rateLimit: { requests: 100000, window: "1m" } },
};

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

for (const dialect of ["sqlite", "postgres"] as const) {
  describe(`auth (${dialect})`, () => {
    let s: TestServer;
    let drop: (() => Promise<void>) | null = null;

    before(async () => {
      const raw: Record<string, unknown> = { models, plans, adminToken, server: { trustProxy: ["127.0.0.1"] } };
      if (dialect === "postgres") {
        const db = await freshPostgres();
        drop = db.drop;
        raw.database = { url: db.url };
        raw.keySecret = "auth-test-key-secret-0123456789";
      }
      s = await startServer(raw);
    });
    after(async () => {
      await s?.close();
      await drop?.();
    });

    test("§5 a valid key lists models (200) and a brand-new key works on its very next request", async () => {
      const { key } = await s.createKey();
      const res = await s.fetch(`${s.baseURL}/models`, { headers: bearer(key) });
      assert.equal(res.status, 200);
      const body = (await res.json()) as { data: { id: string }[] };
      assert.deepEqual(body.data.map((m) => m.id).sort(), ["other-chat", "test-chat"]);
      assert.ok(res.headers.get("x-request-id"));
    });

    test("§7 invalid_api_key (401, param null) for missing, non-Bearer, malformed, bad checksum and unknown keys", async () => {
      const { key } = await s.createKey();
      const badChecksum = key.slice(0, 20) + (key[20] === "A" ? "B" : "A") + key.slice(21);
      const cases: Record<string, Record<string, string>> = {
        missing: {},
        basic: { authorization: `Basic ${Buffer.from(`x:${key}`).toString("base64")}` },
        "bearer without key": { authorization: "Bearer" },
        malformed: bearer("sk-not-ours"),
        "bad checksum": bearer(badChecksum),
        "admin token on /v1": bearer(adminToken),
      };
      for (const [name, headers] of Object.entries(cases)) {
        const res = await s.fetch(`${s.baseURL}/models`, { headers });
        assert.deepEqual(await errorOf(res), { status: 401, type: "authentication_error", code: "invalid_api_key", param: null }, name);
        assert.ok(res.headers.get("x-ratelimit-limit-requests"), `${name}: anonymous limiter headers`);
        assert.ok(res.headers.get("x-request-id"));
      }
    });

    test("§5 a well-formed key that is not in the store is 401 (no DB row, never cached as valid)", async () => {
      const { generateKey } = await import("../src/keys/key-format.ts");
      const res = await s.fetch(`${s.baseURL}/models`, { headers: bearer(generateKey()) });
      assert.deepEqual(await errorOf(res), { status: 401, type: "authentication_error", code: "invalid_api_key", param: null });
    });

    test("§7 unknown path with a bad key is 401 (auth before 404); with a good key 404 model_not_found param null", async () => {
      const { key } = await s.createKey();
      assert.equal((await s.fetch(`${s.baseURL}/nope`)).status, 401);
      const res = await s.fetch(`${s.baseURL}/nope`, { headers: bearer(key) });
      assert.deepEqual(await errorOf(res), { status: 404, type: "invalid_request_error", code: "model_not_found", param: null });
      assert.ok(res.headers.get("x-ratelimit-remaining-requests"));
    });

    test("§3 revocation: 401 invalid_api_key within 1 s, permanently", async () => {
      const { key, id } = await s.createKey({ plan: "polling" });
      assert.equal((await s.fetch(`${s.baseURL}/models`, { headers: bearer(key) })).status, 200);
      const store = await openStore(s.config, silentLogger());
      try {
        await revokeKey(store, id, { actor: "cli" });
      } finally {
        await store.close();
      }
      const revokedAt = Date.now();
      let status = 200;
      while (status === 200 && Date.now() - revokedAt < 1500) {
        const res = await s.fetch(`${s.baseURL}/models`, { headers: bearer(key) });
        status = res.status;
        if (status !== 200) assert.deepEqual(await errorOf(res), { status: 401, type: "authentication_error", code: "invalid_api_key", param: null });
        else await res.arrayBuffer();
      }
      const seenAfter = Date.now() - revokedAt;
      assert.equal(status, 401);
      assert.ok(seenAfter <= 1000, `revocation seen after ${seenAfter} ms`);
    });

    test("§3 rotation: both keys work until the old one is revoked", async () => {
      const { id, key } = await s.createKey({ models: ["test-*"] });
      const res = await s.fetch(`${s.origin}/admin/v1/keys/${id}/rotate`, { method: "POST", headers: bearer(adminToken) });
      assert.equal(res.status, 201);
      const rotated = (await res.json()) as { id: string; key: string; account: string };
      for (const k of [key, rotated.key]) {
        const list = await s.fetch(`${s.baseURL}/models`, { headers: bearer(k) });
        assert.deepEqual(((await list.json()) as { data: { id: string }[] }).data.map((m) => m.id), ["test-chat"], "same scopes");
      }
      const revoke = await s.fetch(`${s.origin}/admin/v1/keys/${id}/revoke`, { method: "POST", headers: bearer(adminToken) });
      assert.deepEqual(Object.keys((await revoke.json()) as object).sort(), ["id", "revokedAt"]);
      const statusOf = async (k: string) => {
        const res = await s.fetch(`${s.baseURL}/models`, { headers: bearer(k) });
        await res.arrayBuffer();
        return res.status;
      };
      await until(async () => (await statusOf(key)) === 401, "the old key's 401 (within 1 s)", 1000);
      assert.equal(await statusOf(key), 401);
      assert.equal(await statusOf(rotated.key), 200);
    });

    test("§5.4 a key bound to another deployment is 401 invalid_api_key on this node", async () => {
      const { key } = await s.createKey({ deployment: "dedicated-a" });
      const res = await s.fetch(`${s.baseURL}/models`, { headers: bearer(key) });
      assert.deepEqual(await errorOf(res), { status: 401, type: "authentication_error", code: "invalid_api_key", param: null });
    });

    test("§5.5 ip_not_allowed (403, param null) outside the account allowlist, IPv4 and IPv6, X-Forwarded-For from trusted proxy only", async () => {
      const { key } = await s.createKey({ plan: "dedicated", allowIps: ["10.9.0.0/16", "2001:db8::/32"] });
      const from = (ip?: string) => s.fetch(`${s.baseURL}/models`, { headers: { ...bearer(key), ...(ip ? { "x-forwarded-for": ip } : {}) } });
      assert.equal((await from("10.9.1.2")).status, 200);
      assert.equal((await from("2001:db8:0:1::7")).status, 200);
      for (const ip of [undefined, "10.8.0.1", "2001:db9::1"]) {
        const res = await from(ip);
        assert.deepEqual(await errorOf(res), { status: 403, type: "permission_error", code: "ip_not_allowed", param: null }, String(ip));
        assert.ok(res.headers.get("x-ratelimit-limit-requests"));
      }
      const local = await s.createKey({ plan: "dedicated", allowIps: ["127.0.0.1/32"] });
      assert.equal((await s.fetch(`${s.baseURL}/models`, { headers: bearer(local.key) })).status, 200);
    });

    test("§4.1 GET /v1/models lists only what the key and plan may call; §7 model_not_in_plan sets param=model", async () => {
      const scoped = await s.createKey({ models: ["test-*"] });
      let res = await s.fetch(`${s.baseURL}/models`, { headers: bearer(scoped.key) });
      assert.deepEqual(((await res.json()) as { data: { id: string }[] }).data.map((m) => m.id), ["test-chat"]);
      res = await s.fetch(`${s.baseURL}/models/other-chat`, { headers: bearer(scoped.key) });
      assert.deepEqual(await errorOf(res), { status: 403, type: "permission_error", code: "model_not_in_plan", param: "model" });

      const plan = await s.createKey({ plan: "narrow" });
      res = await s.fetch(`${s.baseURL}/models`, { headers: bearer(plan.key) });
      assert.deepEqual(((await res.json()) as { data: { id: string }[] }).data.map((m) => m.id), ["test-chat"]);

      const chatOnly = await s.createKey({ endpoints: ["chat"] });
      res = await s.fetch(`${s.baseURL}/models`, { headers: bearer(chatOnly.key) });
      assert.deepEqual(await errorOf(res), { status: 403, type: "permission_error", code: "model_not_in_plan", param: "model" });
    });

    test("§7 the openai client sees AuthenticationError and PermissionDeniedError with the codes", async () => {
      await assert.rejects(s.openai("mg_wrong").models.list(), (err: unknown) => {
        assert.ok(err instanceof OpenAI.AuthenticationError, String(err));
        assert.equal(err.status, 401);
        assert.equal(err.code, "invalid_api_key");
        assert.equal(err.type, "authentication_error");
        return true;
      });
      const { key } = await s.createKey({ plan: "dedicated", allowIps: ["10.0.0.0/8"] });
      await assert.rejects(s.openai(key).models.list(), (err: unknown) => {
        assert.ok(err instanceof OpenAI.PermissionDeniedError, String(err));
        assert.equal(err.code, "ip_not_allowed");
        assert.equal(err.param, null);
        return true;
      });
      const scoped = await s.createKey({ models: ["test-*"] });
      await assert.rejects(s.openai(scoped.key).models.retrieve("other-chat"), (err: unknown) => {
        assert.ok(err instanceof OpenAI.PermissionDeniedError, String(err));
        assert.equal(err.code, "model_not_in_plan");
        assert.equal(err.param, "model");
        return true;
      });
      const ok = await s.openai(scoped.key).models.list();
      assert.deepEqual(ok.data.map((m) => m.id), ["test-chat"]);
    });

    test("admin API: token required (401), accounts and keys created there work on /v1 at once", async () => {
      const post = (url: string, body: unknown, token = adminToken) => s.post(url, body, { key: token });
      const denied = await post("/admin/v1/accounts", { name: "nope" }, "wrong-token-0123456789");
      assert.deepEqual(await errorOf(denied), { status: 401, type: "authentication_error", code: "invalid_api_key", param: null });
      const acct = await post("/admin/v1/accounts", { name: `admin-made-${dialect}`, plan: "narrow", contacts: ["ops@example.com"] });
      assert.equal(acct.status, 201);
      const account = (await acct.json()) as { id: string; plan: string };
      assert.equal(account.plan, "narrow");
      const bad = await post("/admin/v1/accounts", { name: "x", plan: "missing-plan" });
      assert.deepEqual(await errorOf(bad), { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "plan" });
      const created = await post("/admin/v1/keys", { account: account.id, endpoints: ["models"] });
      const key = (await created.json()) as { id: string; key: string; prefix: string; account: string };
      assert.equal(key.account, account.id);
      assert.ok(key.key.startsWith(key.prefix));
      assert.equal((await s.fetch(`${s.baseURL}/models`, { headers: bearer(key.key) })).status, 200);
      const listed = await s.fetch(`${s.origin}/admin/v1/keys?account=${account.id}`, { headers: bearer(adminToken) });
      const text = await listed.text();
      assert.ok(!text.includes(key.key), "the key value is never shown again");
      assert.ok(text.includes(key.prefix));
      const patched = await s.fetch(`${s.origin}/admin/v1/accounts/${account.id}`, {
        method: "PATCH",
        headers: { ...bearer(adminToken), "content-type": "application/json" },
        body: JSON.stringify({ plan: "dedicated", allowIps: ["10.0.0.0/8"] }),
      });
      assert.deepEqual(((await patched.json()) as { allowIps: string[] }).allowIps, ["10.0.0.0/8"]);
      const usage = await s.fetch(`${s.origin}/admin/v1/usage?account=${account.id}`, { headers: { "x-admin-token": adminToken } });
      assert.deepEqual(await usage.json(), { object: "list", data: [] });
      const unknown = await s.fetch(`${s.origin}/admin/v1/keys/key_nope/revoke`, { method: "POST", headers: bearer(adminToken) });
      assert.deepEqual(await errorOf(unknown), { status: 404, type: "invalid_request_error", code: "model_not_found", param: "id" });
    });
  });
}

test("a key hashed under another secret is not valid (HMAC under the server secret), and the store refuses to open under another secret", async () => {
  const s = await startServer({ models: [], keySecret: "secret-a-0123456789abcdef" });
  try {
    await assert.rejects(openStore({ ...s.config, keySecret: "secret-b-0123456789abcdef" }, silentLogger()), /is not the one this database's API keys are hashed with/);
    // What a node with the other secret would have written.
    const store = await openStore(s.config, silentLogger());
    const key = generateKey();
    try {
      const account = await store.accounts.insert({ id: "acct_x", name: "x", plan: "default", allowIps: [], contacts: [], createdAt: new Date().toISOString() });
      const record = { id: newId("key"), accountId: account.id, prefix: displayPrefix(key), name: null, models: null, endpoints: null, deployment: null, createdAt: new Date().toISOString(), lastUsedAt: null, revokedAt: null };
      await store.keys.insert(record, hashKey(Buffer.from("secret-b-0123456789abcdef"), key));
    } finally {
      await store.close();
    }
    assert.equal((await s.fetch(`${s.baseURL}/models`, { headers: bearer(key) })).status, 401);
  } finally {
    await s.close();
  }
});

test("§5.4 on a dedicated node only keys bound to it are valid; they also get the node's rate-limit headers", async () => {
  const shared = await startServer({ models, plans });
  const dedicated = await startServer({ models, plans, deployment: "dedicated-a" }, { dataDir: shared.config.dataDir });
  try {
    const bound = await shared.createKey({ deployment: "dedicated-a" });
    const unbound = await shared.createKey();
    const onDedicated = await dedicated.fetch(`${dedicated.baseURL}/models`, { headers: bearer(bound.key) });
    assert.equal(onDedicated.status, 200);
    assert.ok(onDedicated.headers.get("x-ratelimit-limit-requests"));
    const unboundThere = await dedicated.fetch(`${dedicated.baseURL}/models`, { headers: bearer(unbound.key) });
    assert.deepEqual(await errorOf(unboundThere), { status: 401, type: "authentication_error", code: "invalid_api_key", param: null });
    assert.equal((await shared.fetch(`${shared.baseURL}/models`, { headers: bearer(bound.key) })).status, 401);
    assert.equal((await shared.fetch(`${shared.baseURL}/models`, { headers: bearer(unbound.key) })).status, 200);
  } finally {
    await dedicated.close();
    await shared.close();
  }
});
