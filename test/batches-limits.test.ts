import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import OpenAI, { toFile } from "openai";
import { modelsDir, startServer, type TestServer } from "../harness/server.ts";
import { freshPostgres } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { resolveKey } from "../src/auth/effective-limits.ts";
import type { Account } from "../src/store/accounts.repo.ts";
import type { ApiKeyRecord } from "../src/store/keys.repo.ts";
import { waitFor } from "./helpers/wait-for.ts";

/**
 * Issue 42.1: a batch's lines are held to the same effective limits as the key's /v1 requests (one resolver:
 * auth/effective-limits.ts), and a node takes only batches whose key may run on it.
 */
const adminToken = randomBytes(32).toString("base64url");
const admin = { authorization: `Bearer ${adminToken}` };
// One micro-unit a token, in and out.
const stories = { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, threads: 1, parallel: 2, pricing: { input: 1, output: 1 } };

function chatLines(n: number, maxTokens: number): string {
  const lines = Array.from({ length: n }, (_, i) => ({
    custom_id: `req-${i + 1}`,
    method: "POST",
    url: "/v1/chat/completions",
    body: { model: "stories", messages: [{ role: "user", content: `Once upon a time ${i}` }], max_tokens: maxTokens, temperature: 0 },
  }));
  return lines.map((l) => JSON.stringify(l)).join("\n") + "\n";
}

async function createBatch(client: OpenAI, content: string) {
  const file = await client.files.create({ file: await toFile(Buffer.from(content), "input.jsonl"), purpose: "batch" });
  return client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
}

const finished = (client: OpenAI, id: string) =>
  waitFor(() => client.batches.retrieve(id), (b) => ["completed", "failed", "expired", "cancelled"].includes(b.status), `batch ${id} to finish`, 60_000, 100);

test("issue 42.1: one resolver gives a key its plan with the account's own budget, its scopes, binding and allowlist", () => {
  const config = testConfig({ deployment: "dedicated-a", plans: { capped: { budget: { amount: "1", period: "month" }, ipAllowlist: true } } }, null);
  const key: ApiKeyRecord = { id: "key_1", accountId: "acct_1", prefix: "mg_abc", name: null, models: ["stories*"], endpoints: ["chat"], deployment: "dedicated-a", createdAt: "", lastUsedAt: null, revokedAt: null };
  const account: Account = { id: "acct_1", name: "a", plan: "capped", allowIps: ["10.0.0.0/8"], contacts: [], createdAt: "", budget: { amountMicros: 250, period: "day" } };
  const { auth, revoked, servesHere } = resolveKey(config, { key, account });
  assert.deepEqual(auth.plan.budget, { amountMicro: 250, period: "day" }, "the account's own budget stands in for the plan's");
  assert.equal(config.plans.get("capped")!.budget!.amountMicro, 1_000_000, "the configured plan is left as it is");
  assert.deepEqual([auth.modelScopes, auth.endpointScopes, auth.deployment, revoked, servesHere], [["stories*"], ["chat"], "dedicated-a", false, true]);
  assert.deepEqual([auth.allowlist!.allows("10.1.2.3"), auth.allowlist!.allows("192.168.0.1")], [true, false]);
  assert.equal(resolveKey(config, { key: { ...key, deployment: null }, account }).servesHere, false, "an unbound key is not served on a dedicated deployment");
  assert.equal(resolveKey(config, { key: { ...key, revokedAt: "2024-01-01T00:00:00Z" }, account }).revoked, true);
  assert.deepEqual(resolveKey(config, { key, account: { ...account, budget: null } }).auth.plan.budget, { amountMicro: 1_000_000, period: "month" });
  assert.throws(() => resolveKey(config, { key, account: { ...account, plan: "gone" } }), (err: { code?: string }) => err.code === "internal_error");
});

test("issue 42.1: a batch is held to the account's own budget: the lines past it fail with the budget's 429, the spend stays within it", async () => {
  const srv = await startServer({ adminToken, models: [stories], batches: { pollInterval: "100ms" } });
  try {
    const { key, accountId } = await srv.createKey();
    const patched = await srv.post(`/admin/v1/accounts/${accountId}`, { budget: { amount: "0.0001", period: "month" } }, { method: "PATCH", headers: admin });
    assert.equal(patched.status, 200, await patched.clone().text());
    const client = srv.openai(key);
    const lines = 20;
    const batch = await finished(client, (await createBatch(client, chatLines(lines, 8))).id);
    assert.equal(batch.status, "completed");
    const { completed, failed } = batch.request_counts!;
    assert.equal(completed + failed, lines);
    assert.ok(completed >= 1 && failed >= 1, `completed ${completed}, failed ${failed}`);
    const errors = (await (await client.files.content(batch.error_file_id!)).text()).trim().split("\n").map((l) => JSON.parse(l));
    for (const line of errors) {
      assert.equal(line.response.status_code, 429);
      assert.equal(line.response.body.error.code, "rate_limit_exceeded");
      assert.match(line.response.body.error.message, /The account's budget of 0\.000100 USD per month/);
    }
    await srv.server.ctx.usage.flush();
    const plan = (await (await srv.get(`/admin/v1/accounts/${accountId}/plan`, { headers: admin })).json()) as { budget: { source: string; spentMicros: number } };
    assert.equal(plan.budget.source, "account");
    assert.ok(plan.budget.spentMicros > 0 && plan.budget.spentMicros <= 100, `spent ${plan.budget.spentMicros} of a budget of 100`);
  } finally {
    await srv.close();
  }
});

test("issue 42.1 (postgres): a node takes only batches whose key may run on it; the key's own deployment runs them", async () => {
  const db = await freshPostgres();
  const base = { adminToken, models: [stories], database: { url: db.url }, keySecret: `batches-limits-${randomBytes(8).toString("hex")}`, batches: { pollInterval: "100ms", leaseTtl: "3s" } };
  const nodes: TestServer[] = [];
  try {
    const dedicated = await startServer({ ...base, deployment: "dedicated-a" });
    nodes.push(dedicated);
    const { key } = await dedicated.createKey({ deployment: "dedicated-a" });
    const lines = 40;
    const created = await createBatch(dedicated.openai(key), chatLines(lines, 48));
    // The dedicated node stops (giving its lease up at once); only a shared node is left.
    await dedicated.close();
    nodes.length = 0;
    const shared = await startServer(base);
    nodes.push(shared);
    const store = shared.server.app.keyStore;
    const before = await store.batches.byId(created.id);
    assert.ok(before!.completed < lines, "the batch was left unfinished");
    // Ten of the shared node's polls: it never takes the batch of a key it may not serve.
    await sleep(1000);
    const row = await store.db.selectFrom("batches").select(["lease_owner", "completed", "failed"]).where("id", "=", created.id).executeTakeFirstOrThrow();
    assert.deepEqual(row, { lease_owner: null, completed: before!.completed, failed: 0 }, "the shared node left the batch alone");
    // A node of the key's deployment takes it and finishes it: no line failed as run elsewhere.
    const again = await startServer({ ...base, deployment: "dedicated-a" });
    nodes.push(again);
    const batch = await finished(again.openai(key), created.id);
    assert.deepEqual([batch.status, batch.request_counts], ["completed", { total: lines, completed: lines, failed: 0 }]);
  } finally {
    for (const node of nodes) await node.close();
    await db.drop();
  }
});
