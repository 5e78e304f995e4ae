import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { sql } from "kysely";
import OpenAI, { toFile } from "openai";
import { startServer, modelsDir, type TestServer } from "../harness/server.ts";
import { freshPostgres } from "../harness/keys.ts";
import { openStore } from "../src/store/store.ts";
import { silentLogger } from "../harness/keys.ts";
import { waitFor } from "./helpers/wait-for.ts";

/**
 * Issue 36, the Batch API, with the official openai client against real servers: stories260K for chat, the forged
 * embedder for embeddings, on SQLite and on PostgreSQL.
 */
const models = [
  { id: "stories-chat", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, threads: 1, parallel: 2 },
  { id: "bert-embed", engine: "llama", source: path.join(modelsDir, "forged/bert-embed-tiny.gguf"), capabilities: ["embeddings"], threads: 1 },
];

const adminToken = "Vr7kQ2mXp9sLw4nTb6yHc1dJf8gAe3uZo5iKq0tRx";

type Line = { custom_id: string; method: string; url: string; body: Record<string, unknown> };

function chatLines(n: number, maxTokens = 8): Line[] {
  return Array.from({ length: n }, (_, i) => ({
    custom_id: `req-${i + 1}`,
    method: "POST",
    url: "/v1/chat/completions",
    body: { model: "stories-chat", messages: [{ role: "user", content: `Once upon a time ${i}` }], max_tokens: maxTokens, temperature: 0 },
  }));
}

const jsonl = (lines: unknown[]) => lines.map((l) => (typeof l === "string" ? l : JSON.stringify(l))).join("\n") + "\n";

async function upload(client: OpenAI, content: string) {
  return client.files.create({ file: await toFile(Buffer.from(content), "input.jsonl"), purpose: "batch" });
}

async function finished(client: OpenAI, id: string, ms = 120_000) {
  return waitFor(() => client.batches.retrieve(id), (b) => ["completed", "failed", "expired", "cancelled"].includes(b.status), `batch ${id} to finish`, ms, 100);
}

async function outputOf(client: OpenAI, fileId: string | null | undefined): Promise<{ custom_id: string; response: { status_code: number; request_id: string; body: any } | null; error: { code: string } | null }[]> {
  if (!fileId) return [];
  const text = await (await client.files.content(fileId)).text();
  return text.trim().split("\n").filter(Boolean).map((l) => JSON.parse(l));
}

for (const dialect of ["sqlite", "postgres"] as const) {
  let srv: TestServer;
  let client: OpenAI;
  let key: { key: string; id: string; accountId: string };
  let dropDb: (() => Promise<void>) | null = null;

  test(`issue 36 (${dialect})`, async (t) => {
    {
      const db = dialect === "postgres" ? await freshPostgres() : null;
      dropDb = db ? () => db.drop() : null;
      srv = await startServer({
        models,
        adminToken,
        batches: { pollInterval: "100ms", leaseTtl: "2s" },
        plans: { default: { maxBatchFileBytes: 64 * 1024 } },
        ...(db ? { database: { url: db.url }, keySecret: "batches-test-secret-0123456789abcdef" } : {}),
      });
      key = await srv.createKey();
      client = srv.openai(key.key);
    }
    try {
      await t.test("end to end on chat: upload, create, poll, download, parse; usage is marked batch", async () => {
        const file = await upload(client, jsonl(chatLines(6)));
        assert.equal(file.object, "file");
        assert.equal(file.purpose, "batch");
        assert.equal((await client.files.retrieve(file.id)).bytes, file.bytes);
        const created = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h", metadata: { run: "e2e" } });
        assert.ok(["validating", "in_progress"].includes(created.status));
        assert.equal(created.request_counts?.total, 6);
        const batch = await finished(client, created.id);
        assert.equal(batch.status, "completed");
        assert.deepEqual(batch.request_counts, { total: 6, completed: 6, failed: 0 });
        assert.deepEqual(batch.metadata, { run: "e2e" });
        assert.ok(batch.finalizing_at && batch.completed_at && batch.in_progress_at);
        const out = await outputOf(client, batch.output_file_id);
        assert.deepEqual(out.map((l) => l.custom_id), chatLines(6).map((l) => l.custom_id));
        for (const line of out) {
          assert.equal(line.response!.status_code, 200);
          assert.equal(line.response!.body.object, "chat.completion");
          assert.ok(line.response!.body.choices[0].message.content.length > 0);
          assert.equal(line.error, null);
        }
        assert.equal(batch.error_file_id, null);
        const listed = await client.batches.list({ limit: 10 });
        assert.ok(listed.data.some((b) => b.id === batch.id));
        await srv.server.ctx.usage.flush();
        const store = await openStore(srv.config, silentLogger());
        try {
          const row = await store.db.selectFrom("usage").selectAll().where("key_id", "=", key.id).where("endpoint", "=", "chat").executeTakeFirstOrThrow();
          assert.equal(Number(row.batch_requests), 6, "usage rows count the batch lines, marked batch");
          assert.ok(Number(row.batch_completion_tokens) > 0);
        } finally {
          await store.close();
        }
      });

      await t.test("console and metrics: the account's batches with their progress; batch lines and queue depth in /metrics", async () => {
        const admin = { headers: { authorization: `Bearer ${adminToken}` } };
        const listed = (await (await srv.get(`/admin/v1/batches?account=${key.accountId}`, admin)).json()) as { data: { id: string; status: string; total: number; completed: number; accountId: string }[] };
        assert.ok(listed.data.length >= 1);
        assert.ok(listed.data.every((b) => b.accountId === key.accountId));
        assert.deepEqual([listed.data[0].status, listed.data[0].total, listed.data[0].completed], ["completed", 6, 6]);
        const other = await srv.createKey();
        const none = (await (await srv.get(`/admin/v1/batches?account=${other.accountId}`, admin)).json()) as { data: unknown[] };
        assert.equal(none.data.length, 0);
        const metrics = await (await srv.get("/metrics", admin)).text();
        assert.match(metrics, /modelgate_batch_lines_total\{endpoint="chat",outcome="completed"\} 6\b/);
        assert.match(metrics, /modelgate_batch_queue_depth 0\b/);
      });

      await t.test("end to end on embeddings with the forged embedder; a line the model refuses goes to the error file", async () => {
        const lines = ["The cat sat on the mat.", "A dog runs in the park."].map((input, i) => ({ custom_id: `e${i}`, method: "POST", url: "/v1/embeddings", body: { model: "bert-embed", input } }));
        lines.push({ custom_id: "unknown-model", method: "POST", url: "/v1/embeddings", body: { model: "no-such-model", input: "x" } });
        const file = await upload(client, jsonl(lines));
        const batch = await finished(client, (await client.batches.create({ input_file_id: file.id, endpoint: "/v1/embeddings", completion_window: "24h" })).id);
        assert.equal(batch.status, "completed");
        assert.deepEqual(batch.request_counts, { total: 3, completed: 2, failed: 1 });
        const out = await outputOf(client, batch.output_file_id);
        assert.deepEqual(out.map((l) => l.custom_id), ["e0", "e1"]);
        assert.equal(out[0].response!.body.data[0].embedding.length, 64);
        const errors = await outputOf(client, batch.error_file_id);
        assert.equal(errors.length, 1);
        assert.equal(errors[0].custom_id, "unknown-model");
        assert.equal(errors[0].response!.status_code, 404);
        assert.equal(errors[0].response!.body.error.code, "model_not_found");
      });

      await t.test("validation: a bad line fails the batch with errors.data[].line, nothing runs", async () => {
        const good = chatLines(5);
        const content = jsonl([
          good[0],
          "{not json",
          { ...good[1], url: "/v1/embeddings" },
          { ...good[2], body: { model: "stories-chat", messages: [] } },
          { ...good[3], custom_id: "req-1" },
          good[4],
        ]);
        const file = await upload(client, content);
        const batch = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
        assert.equal(batch.status, "failed");
        assert.ok(batch.failed_at);
        const errors = batch.errors!.data!.map((e) => [e.line, e.code, e.param]);
        assert.deepEqual(errors, [
          [2, "invalid_json_line", null],
          [3, "url_mismatch", "url"],
          [4, "invalid_request", "body.messages"],
          [5, "duplicate_custom_id", "custom_id"],
        ]);
        assert.equal((await client.batches.retrieve(batch.id)).status, "failed");
      });

      await t.test("limits and scopes: over maxBatchFileBytes is 413; a key without chat cannot create a chat batch", async () => {
        await assert.rejects(upload(client, "x".repeat(65 * 1024)), (err: any) => err.status === 413 && err.code === "request_too_large");
        const embedOnly = await srv.createKey({ endpoints: ["embeddings"] });
        const other = srv.openai(embedOnly.key);
        const file = await upload(other, jsonl(chatLines(1)));
        await assert.rejects(other.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" }), (err: any) => err.status === 403);
      });

      if (dialect === "postgres") {
        await t.test("the database stalls mid-batch (the keys table locked past the pool's query timeout): the lines wait it out, none is failed", async () => {
          const lines = 40;
          const file = await upload(client, jsonl(chatLines(lines, 48)));
          const created = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
          await waitFor(() => client.batches.retrieve(created.id), (b) => (b.request_counts?.completed ?? 0) >= 2, "two lines done");
          // Another session holds the lock: the runner's next read of the batch's key (its cache lasts a second) waits
          // on it until the pool's 5 s query timeout gives up.
          const stall = await openStore(srv.config, silentLogger());
          try {
            await stall.db.transaction().execute(async (trx) => {
              await sql`LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE`.execute(trx);
              await sleep(7_000);
            });
          } finally {
            await stall.close();
          }
          assert.ok((await client.batches.retrieve(created.id)).request_counts!.completed < lines, "the batch was still running when the lock was let go");
          const batch = await finished(client, created.id);
          assert.deepEqual(batch.request_counts, { total: lines, completed: lines, failed: 0 }, JSON.stringify(await outputOf(client, batch.error_file_id)));
        });
      }

      await t.test("a key revoked mid-batch: its remaining lines fail with 401 in the error file, none is lost", async () => {
        const own = await srv.createKey({ account: key.accountId });
        const mine = srv.openai(own.key);
        const file = await upload(mine, jsonl(chatLines(200, 32)));
        const created = await mine.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
        await waitFor(() => client.batches.retrieve(created.id), (b) => (b.request_counts?.completed ?? 0) >= 2, "two lines done");
        await srv.server.app.keyStore.keys.revoke(own.id, new Date().toISOString());
        const batch = await finished(client, created.id);
        assert.equal(batch.status, "completed");
        const { completed, failed } = batch.request_counts!;
        assert.ok(failed > 0 && completed + failed === 200, `completed ${completed}, failed ${failed}`);
        const errors = await outputOf(client, batch.error_file_id);
        assert.equal(errors.length, failed);
        assert.ok(errors.every((e) => e.response!.status_code === 401 && e.response!.body.error.code === "invalid_api_key"));
      });

      await t.test("isolation: another account's key gets 404 for the files and batches, and does not list them", async () => {
        const file = await upload(client, jsonl(chatLines(1)));
        const batch = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
        const other = srv.openai((await srv.createKey()).key);
        await assert.rejects(other.files.retrieve(file.id), (err: any) => err.status === 404);
        await assert.rejects(other.files.content(file.id), (err: any) => err.status === 404);
        await assert.rejects(other.files.delete(file.id), (err: any) => err.status === 404);
        await assert.rejects(other.batches.retrieve(batch.id), (err: any) => err.status === 404);
        await assert.rejects(other.batches.cancel(batch.id), (err: any) => err.status === 404);
        await assert.rejects(other.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" }), (err: any) => err.status === 404);
        assert.equal((await other.files.list()).data.length, 0);
        assert.equal((await other.batches.list()).data.length, 0);
        await finished(client, batch.id);
        assert.equal((await client.files.delete(file.id)).deleted, true);
        await assert.rejects(client.files.retrieve(file.id), (err: any) => err.status === 404);
      });

      await t.test("cancel mid-run: cancelling then cancelled; lines done so far are in the output, the rest batch_cancelled", async () => {
        const file = await upload(client, jsonl(chatLines(40, 48)));
        const created = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
        await waitFor(() => client.batches.retrieve(created.id), (b) => (b.request_counts?.completed ?? 0) >= 2, "two lines done");
        const cancelling = await client.batches.cancel(created.id);
        assert.ok(["cancelling", "cancelled"].includes(cancelling.status));
        const batch = await finished(client, created.id);
        assert.equal(batch.status, "cancelled");
        assert.ok(batch.cancelled_at && batch.cancelling_at);
        const done = batch.request_counts!.completed;
        assert.ok(done >= 2 && done < 40, `completed ${done} of 40`);
        const out = await outputOf(client, batch.output_file_id);
        const errors = await outputOf(client, batch.error_file_id);
        assert.equal(out.length, done);
        assert.equal(out.length + errors.length, 40, "every line is in one file, once");
        assert.ok(errors.every((e) => e.error?.code === "batch_cancelled"));
      });

      await t.test("expiry: a batch past its completion window ends expired, the lines not run as batch_expired", async () => {
        // Enough lines that the batch cannot end before the runner's next lease renewal (every leaseTtl / 3) reads the
        // deadline: 30 lines took about 700 ms on a quiet machine, as long as the renewal interval.
        const lines = 300;
        const file = await upload(client, jsonl(chatLines(lines, 48)));
        const created = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
        assert.equal(created.expires_at! - created.created_at, 24 * 3600);
        await waitFor(() => client.batches.retrieve(created.id), (b) => (b.request_counts?.completed ?? 0) >= 1, "a line done");
        // The window ends now: the store's deadline is what every node reads when it takes (or takes over) the batch.
        await srv.server.app.keyStore.db.updateTable("batches").set({ expires_at: Date.now() - 1 }).where("id", "=", created.id).execute();
        const batch = await finished(client, created.id);
        assert.equal(batch.status, "expired");
        assert.ok(batch.expired_at);
        const out = await outputOf(client, batch.output_file_id);
        const errors = await outputOf(client, batch.error_file_id);
        assert.ok(errors.length > 0 && errors.every((e) => e.error?.code === "batch_expired"));
        assert.equal(new Set([...out, ...errors].map((l) => l.custom_id)).size, lines);
        assert.equal(out.length + errors.length, lines);
      });
    } finally {
      await srv?.close();
      await dropDb?.();
    }
  });
}
