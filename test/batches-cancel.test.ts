import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import OpenAI, { toFile } from "openai";
import { rmSync } from "node:fs";
import { startServer, tempDir, type TestServer } from "../harness/server.ts";
import { freshPostgres, redisTestUrl, silentLogger } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { startPacedUpstream } from "../harness/paced-upstream.mjs";
import { openStore } from "../src/store/store.ts";
import type { BatchRecord } from "../src/store/batches.repo.ts";
import { waitFor } from "./helpers/wait-for.ts";

/**
 * Issue 42.6: a cancel stops a running batch within 1 s, on the node that took the cancel and on another replica
 * (through Redis when configured, else by polling the store): lines not started never start, the batch ends
 * `cancelled`, never `completed`, and request_counts say what ran. Each line is a completion of an upstream that
 * answers in 400 ms, two at a time, so the lines that run after the cancel are counted, not timed: within 1 s at
 * most the two running, and two more every 400 ms. The lease is the default 30 s, renewed every 10 s: without the
 * fix the runner learns of the cancel only then, after all 40 lines (8 s) have run, and the batch ends completed.
 */
const lineMs = 400;
const lines = 40;
const ranWithinOneSecond = 2 + 2 * Math.ceil(1000 / lineMs);

function input(count = lines): string {
  return Array.from({ length: count }, (_, i) =>
    JSON.stringify({ custom_id: `c${i}`, method: "POST", url: "/v1/chat/completions", body: { model: "paced", messages: [{ role: "user", content: `Line ${i}` }], max_tokens: 16 } }),
  ).join("\n");
}

async function fileLines(client: OpenAI, id: string | null | undefined): Promise<{ response: unknown; error: { code: string; message: string } | null }[]> {
  if (!id) return [];
  return (await (await client.files.content(id)).text()).trim().split("\n").map((l) => JSON.parse(l));
}

async function scenario(replicas: "one node" | "polling" | "redis"): Promise<void> {
  const paced = await startPacedUpstream({ durationMs: lineMs });
  const db = replicas === "one node" ? null : await freshPostgres();
  const raw = {
    models: [{ id: "paced", engine: "upstream", capabilities: ["chat"], parallel: 2, upstreams: [{ url: `http://127.0.0.1:${paced.port}/v1`, model: "paced" }] }],
    batches: { pollInterval: "100ms" },
    ...(db ? { database: { url: db.url }, keySecret: `batches-cancel-${randomBytes(8).toString("hex")}` } : {}),
    ...(replicas === "redis" ? { redis: { url: redisTestUrl } } : {}),
  };
  const nodes: TestServer[] = [];
  try {
    nodes.push(await startServer(raw));
    if (replicas !== "one node") nodes.push(await startServer(raw));
    const { key, id: keyId } = await nodes[0].createKey();
    const first = nodes[0].openai(key);
    const file = await first.files.create({ file: await toFile(Buffer.from(input()), "input.jsonl"), purpose: "batch" });
    const created = await first.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const store = nodes[0].server.app.keyStore;
    const running = await waitFor(() => store.batches.byId(created.id), (b) => b !== null && b.completed >= 2, "two lines done", 30_000, 20);
    // Cancelled through a node that does not work the batch, when there is one.
    const owner = (await store.db.selectFrom("batches").select("lease_owner").where("id", "=", created.id).executeTakeFirstOrThrow()).lease_owner;
    const holder = nodes.find((n) => n.server.app.batchRunner!.owner === owner);
    assert.ok(holder, `a node holds the batch (${owner})`);
    const canceller = nodes.find((n) => n !== holder) ?? holder;
    const cancelling = await canceller.openai(key).batches.cancel(running!.id);
    assert.equal(cancelling.status, "cancelling");
    const ranBefore = cancelling.request_counts!.completed + cancelling.request_counts!.failed;

    const batch = await waitFor(() => first.batches.retrieve(created.id), (b) => ["completed", "cancelled", "failed", "expired"].includes(b.status), "the batch to end", 30_000, 50);
    const { completed, failed, total } = batch.request_counts!;
    assert.equal(batch.status, "cancelled", `ended ${batch.status} with ${completed} of ${total} lines completed`);
    assert.ok(completed + failed - ranBefore <= ranWithinOneSecond, `${completed + failed - ranBefore} lines ran after the cancel (${ranBefore} before it)`);
    // request_counts say what ran: the output file holds the completed lines; the failed ones were stopped while
    // they ran (and charged for it); the rest never started.
    const output = await fileLines(first, batch.output_file_id);
    const errors = await fileLines(first, batch.error_file_id);
    assert.equal(output.length, completed);
    assert.equal(output.length + errors.length, lines);
    assert.ok(errors.every((e) => e.error?.code === "batch_cancelled"));
    assert.equal(errors.filter((e) => /stopped/.test(e.error!.message)).length, failed);
    for (const node of nodes) await node.server.ctx.usage.flush();
    const usage = await store.db.selectFrom("usage").select((eb) => eb.fn.sum<number>("batch_requests").as("n")).where("key_id", "=", keyId).executeTakeFirstOrThrow();
    assert.equal(Number(usage.n), completed + failed, "every line that ran is in the usage, and only those");
  } finally {
    for (const node of nodes) await node.close();
    await db?.drop();
    paced.server.closeAllConnections();
    paced.server.close();
  }
}

test("issue 42.6: cancel stops a running batch within 1 s on its node; it ends cancelled and request_counts say what ran", () => scenario("one node"));
test("issue 42.6 (postgres): cancel through another replica without Redis reaches the node working the batch within 1 s (polling)", () => scenario("polling"));
test("issue 42.6 (postgres, redis): cancel through another replica reaches the node working the batch within 1 s through Redis", () => scenario("redis"));

test("issue 42.2 with 42.6 (postgres): lines stopped by a node stopping run again on another node and are charged once, there", async () => {
  const shortBatch = 12;
  const paced = await startPacedUpstream({ durationMs: lineMs });
  const db = await freshPostgres();
  const raw = {
    models: [{ id: "paced", engine: "upstream", capabilities: ["chat"], parallel: 2, upstreams: [{ url: `http://127.0.0.1:${paced.port}/v1`, model: "paced" }] }],
    batches: { pollInterval: "100ms" },
    database: { url: db.url },
    keySecret: `batches-cancel-${randomBytes(8).toString("hex")}`,
  };
  const nodes: TestServer[] = [];
  try {
    nodes.push(await startServer(raw), await startServer(raw));
    const { key, id: keyId } = await nodes[0].createKey();
    const first = nodes[0].openai(key);
    const file = await first.files.create({ file: await toFile(Buffer.from(input(shortBatch)), "input.jsonl"), purpose: "batch" });
    const created = await first.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    const store = nodes[0].server.app.keyStore;
    await waitFor(() => store.batches.byId(created.id), (b) => b !== null && b.completed >= 2, "two lines done", 30_000, 20);
    // The node working the batch stops with its lines running: they stay pending, and the other node runs them.
    const owner = (await store.db.selectFrom("batches").select("lease_owner").where("id", "=", created.id).executeTakeFirstOrThrow()).lease_owner;
    const holder = nodes.find((n) => n.server.app.batchRunner!.owner === owner)!;
    nodes.splice(nodes.indexOf(holder), 1);
    await holder.close();
    const left = await nodes[0].server.app.keyStore.batches.byId(created.id);
    assert.ok(left!.completed < shortBatch, `the node stopped mid-batch (${left!.completed} of ${shortBatch} done)`);
    const batch = await waitFor(() => nodes[0].openai(key).batches.retrieve(created.id), (b) => b.status === "completed", "the batch to complete on the other node", 60_000, 100);
    assert.deepEqual(batch.request_counts, { total: shortBatch, completed: shortBatch, failed: 0 });
    await nodes[0].server.ctx.usage.flush();
    const usage = await nodes[0].server.app.keyStore.db.selectFrom("usage").select((eb) => eb.fn.sum<number>("batch_requests").as("n")).where("key_id", "=", keyId).executeTakeFirstOrThrow();
    assert.equal(Number(usage.n), shortBatch, "each line charged once");
  } finally {
    for (const node of nodes) await node.close();
    await db.drop();
    paced.server.closeAllConnections();
    paced.server.close();
  }
});

test("issue 42.6: a batch cancelled after its last line ran, before it was finalized, ends cancelled, never completed", async () => {
  const dir = tempDir();
  const config = testConfig({ dataDir: dir }, null);
  const store = await openStore(config, silentLogger());
  try {
    const now = Date.now();
    const batch: BatchRecord = {
      id: "batch_late_cancel", accountId: "acct_x", keyId: "key_x", endpoint: "/v1/chat/completions", inputFileId: "file-x", completionWindow: "24h", status: "in_progress",
      metadata: null, errors: null, outputFileId: null, errorFileId: null, total: 1, completed: 0, failed: 0, concurrency: 1, createdAt: now, inProgressAt: now, expiresAt: now + 86_400_000,
      finalizingAt: null, completedAt: null, failedAt: null, expiredAt: null, cancellingAt: null, cancelledAt: null, outputExpiresAfterMs: null,
    };
    await store.batches.insert(batch, [{ line: 1, customId: "only", body: "{}" }]);
    const held = await store.batches.take(batch.id, "node-a", now, 30_000);
    assert.equal(held?.id, batch.id);
    assert.equal(await store.batches.complete(batch.id, "node-a", 1, "done", JSON.stringify({ custom_id: "only" })), "written");
    // The runner saw every line done and ends the batch; the cancel landed just before.
    assert.equal((await store.batches.requestCancel("acct_x", batch.id, Date.now()))?.status, "cancelling");
    assert.equal(await store.batches.markFinalizing(batch.id, "node-a", Date.now()), true);
    assert.equal(await store.batches.finalize(held!, "node-a", "completed", Date.now(), () => `file-${randomBytes(6).toString("hex")}`), "cancelled");
    const ended = await store.batches.byId(batch.id);
    assert.deepEqual([ended!.status, ended!.completed, ended!.cancelledAt !== null, ended!.completedAt], ["cancelled", 1, true, null]);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
