import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { startServer, modelsDir, type TestServer } from "../harness/server.ts";
import { freshPostgres, silentLogger } from "../harness/keys.ts";
import { StorageSweeper } from "../src/features/batches/storage-sweeper.ts";
import { chatBatch, finished, input, streamUpload, upload } from "./helpers/batch-files.ts";
import { waitFor } from "./helpers/wait-for.ts";

/**
 * Issue 42.7: uploads stream into the store, and what an account stores is bounded (bytes, files, expiry) on every
 * replica (batch-stall.test.ts: creating a batch never stalls the server). The official openai client where it can send what is tested.
 */

const stories = { engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, threads: 1 };

async function rows(srv: TestServer, table: "files" | "file_chunks" | "batch_lines", column: "id" | "file_id" | "batch_id", value: string): Promise<number> {
  const row = await srv.server.app.keyStore.db
    .selectFrom(table)
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where(column as never, "=", value as never)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

let srv: TestServer;
test("issue 42.7: storage limits and expiry (SQLite)", async (t) => {
  srv = await startServer({
    models: [{ id: "m", ...stories, parallel: 1 }],
    batches: { pollInterval: "100ms", leaseTtl: "2s", fileExpiry: "2h", outputExpiry: "3h" },
    plans: {
      default: {},
      small: { maxStoredFileBytes: 10_000, maxStoredFiles: 3 },
      shortLines: { maxBodyBytes: 4096 },
      // Room for a 400 KB file, the lines of one batch made from it, and its output: not for the lines of a second batch.
      tight: { maxStoredFileBytes: 1_000_000 },
    },
  });
  try {
    await t.test("a bad last line fails the batch at once; the file keeps its errors, so a second batch fails without reading it", async () => {
      const client = srv.openai((await srv.createKey()).key);
      const good = input(3, 200).toString();
      const file = await upload(client, `${good}{"custom_id":"bad",\n`);
      const first = await chatBatch(client, file.id);
      assert.equal(first.status, "failed");
      assert.deepEqual(first.errors?.data?.map((e) => [e.line, e.code]), [[4, "invalid_json_line"]]);
      assert.equal(await rows(srv, "batch_lines", "batch_id", first.id), 0, "no line was stored");
      // With its bytes gone from the store, a second batch still fails the same way: the file was not read again.
      await srv.server.app.keyStore.db.deleteFrom("file_chunks").where("file_id", "=", file.id).execute();
      const second = await chatBatch(client, file.id);
      assert.equal(second.status, "failed");
      assert.deepEqual(second.errors?.data, first.errors?.data);
    });

    await t.test("a line longer than the plan's maxBodyBytes is request_too_large at its line", async () => {
      const client = srv.openai((await srv.createKey({ plan: "shortLines" })).key);
      const file = await upload(client, Buffer.concat([input(1, 300), input(1, 5000), input(1, 300)]));
      const batch = await chatBatch(client, file.id);
      assert.equal(batch.status, "failed");
      assert.deepEqual(batch.errors?.data?.map((e) => [e.line, e.code]), [
        [2, "request_too_large"],
        [3, "duplicate_custom_id"],
      ]);
    });

    await t.test("an upload is in the store chunk by chunk while it arrives, and listed only once it ends", async () => {
      const { key } = await srv.createKey();
      const content = input(4000, 1000);
      let release!: () => void;
      const until = new Promise<void>((resolve) => (release = resolve));
      const sending = streamUpload(srv, key, content, { purpose: "batch" }, { after: 3 * 1024 * 1024, until });
      const db = srv.server.app.keyStore.db;
      const uploading = await waitFor(
        () => db.selectFrom("files").innerJoin("file_chunks", "file_chunks.file_id", "files.id").select(["files.id", "files.status"]).where("files.status", "=", "uploading").execute(),
        (r) => r.length >= 2,
        "two chunks of the upload in the store before the rest is sent",
      );
      assert.equal((await srv.openai(key).files.list()).data.length, 0, "an upload under way is not listed");
      release();
      const { status, body } = await sending;
      assert.equal(status, 200);
      assert.equal(body.id, uploading[0].id);
      assert.equal(body.bytes, content.length);
      const downloaded = Buffer.from(await (await srv.openai(key).files.content(body.id)).arrayBuffer());
      assert.ok(downloaded.equals(content), "the file reads back whole");
    });

    await t.test("maxStoredFileBytes: 413 past it (an exact fit is taken); maxStoredFiles: 400 param file; a delete gives the room back", async () => {
      const small = srv.openai((await srv.createKey({ plan: "small" })).key);
      await upload(small, "x".repeat(6000));
      await assert.rejects(upload(small, "x".repeat(4001)), (err: any) => err.status === 413 && err.code === "request_too_large" && err.param === null && /maxStoredFileBytes/.test(err.message));
      const fits = await upload(small, "x".repeat(4000));
      await assert.rejects(upload(small, "x"), (err: any) => err.status === 413);
      await small.files.delete(fits.id);
      await upload(small, "x".repeat(10));
      await upload(small, "x".repeat(10));
      await assert.rejects(upload(small, "x"), (err: any) => err.status === 400 && err.code === "invalid_parameter" && err.param === "file" && /maxStoredFiles/.test(err.message));
      assert.equal((await small.files.list()).data.length, 3);
      // Another account of the same plan has its own room.
      await upload(srv.openai((await srv.createKey({ plan: "small" })).key), "x".repeat(10_000));
    });

    await t.test("a running batch's lines count against maxStoredFileBytes until it ends", async () => {
      const client = srv.openai((await srv.createKey({ plan: "tight" })).key);
      const file = await upload(client, input(200, 2000, { maxTokens: 48 }));
      const running = await chatBatch(client, file.id);
      assert.equal(running.status, "in_progress");
      await assert.rejects(chatBatch(client, file.id), (err: any) => err.status === 413 && err.code === "request_too_large" && /maxStoredFileBytes/.test(err.message));
      await client.batches.cancel(running.id);
      assert.equal((await finished(client, running.id)).status, "cancelled");
      assert.equal((await chatBatch(client, file.id)).status, "in_progress", "the ended batch's lines no longer count");
    });

    await t.test("expires_after on an upload (OpenAI's fields and bounds) and batches.fileExpiry by default", async () => {
      const { key } = await srv.createKey();
      const client = srv.openai(key);
      const own = await upload(client, input(1, 200), { expires_after: { anchor: "created_at", seconds: 3600 } });
      assert.equal(own.expires_at, own.created_at + 3600);
      const byDefault = await upload(client, input(1, 200));
      assert.equal(byDefault.expires_at, byDefault.created_at + 7200);
      assert.equal((await client.files.retrieve(own.id)).expires_at, own.expires_at);
      for (const [fields, param] of [
        [{ "expires_after[anchor]": "created_at", "expires_after[seconds]": "3599" }, "expires_after.seconds"],
        [{ "expires_after[anchor]": "created_at", "expires_after[seconds]": "2592001" }, "expires_after.seconds"],
        [{ "expires_after[anchor]": "created_at" }, "expires_after.seconds"],
        [{ "expires_after[anchor]": "last_active_at", "expires_after[seconds]": "3600" }, "expires_after.anchor"],
      ] as const) {
        const { status, body } = await streamUpload(srv, key, input(1, 200), { purpose: "batch", ...fields });
        assert.equal(status, 400, JSON.stringify(fields));
        assert.deepEqual([body.error.code, body.error.param], ["invalid_parameter", param]);
      }
      assert.deepEqual((await client.files.list()).data.map((f) => f.id).sort(), [own.id, byDefault.id].sort(), "refused uploads left nothing");
    });

    await t.test("an expired file is gone from listings, reads and the account's usage at once; the sweep reclaims its bytes", async () => {
      const client = srv.openai((await srv.createKey({ plan: "small" })).key);
      const file = await upload(client, "x".repeat(9000));
      await assert.rejects(upload(client, "x".repeat(2000)), (err: any) => err.status === 413);
      await srv.server.app.keyStore.db.updateTable("files").set({ expires_at: Date.now() - 1 }).where("id", "=", file.id).execute();
      assert.equal((await client.files.list()).data.length, 0);
      for (const read of [() => client.files.retrieve(file.id), () => client.files.content(file.id), () => client.files.delete(file.id), () => chatBatch(client, file.id)]) {
        await assert.rejects(read(), (err: any) => err.status === 404 && err.code === "model_not_found");
      }
      await upload(client, "x".repeat(2000));
      assert.equal(await rows(srv, "file_chunks", "file_id", file.id), 1, "not reclaimed before the sweep");
      await new StorageSweeper(srv.server.app.keyStore, silentLogger()).sweep();
      assert.equal(await rows(srv, "files", "id", file.id), 0);
      assert.equal(await rows(srv, "file_chunks", "file_id", file.id), 0);
    });

    await t.test("output files expire after output_expires_after, else batches.outputExpiry; the sweep reclaims the lines of ended batches", async () => {
      const client = srv.openai((await srv.createKey()).key);
      const file = await upload(client, input(2, 300));
      const own = await finished(client, (await chatBatch(client, file.id, { output_expires_after: { anchor: "created_at", seconds: 4000 } })).id);
      const byDefault = await finished(client, (await chatBatch(client, file.id)).id);
      for (const [batch, seconds] of [[own, 4000], [byDefault, 3 * 3600]] as const) {
        assert.equal(batch.status, "completed");
        const output = await client.files.retrieve(batch.output_file_id!);
        assert.equal(output.expires_at, output.created_at + seconds);
      }
      await assert.rejects(chatBatch(client, file.id, { output_expires_after: { anchor: "created_at", seconds: 60 } }), (err: any) => err.status === 400 && err.param === "output_expires_after.seconds");
      assert.equal(await rows(srv, "batch_lines", "batch_id", own.id), 2);
      await new StorageSweeper(srv.server.app.keyStore, silentLogger()).sweep();
      assert.equal(await rows(srv, "batch_lines", "batch_id", own.id), 0);
      assert.equal((await client.files.content(own.output_file_id!)).ok, true, "the results stay in the output file");
    });
  } finally {
    await srv?.close();
  }
});

test("issue 42.7: maxStoredFileBytes holds across two replicas uploading at once (PostgreSQL)", async () => {
  const db = await freshPostgres();
  const config = { database: { url: db.url }, keySecret: "batch-storage-test-secret-0123456789", models: [], plans: { default: {}, shared: { maxStoredFileBytes: 3 * 100_000 + 3 * 1024 } } };
  const [a, b] = [await startServer(config), await startServer(config)];
  try {
    const { key } = await a.createKey({ plan: "shared" });
    const content = input(100, 1000);
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => streamUpload(i % 2 ? a : b, key, content)));
    assert.deepEqual(results.map((r) => r.status).sort(), [200, 200, 200, 413, 413, 413, 413, 413]);
    assert.equal((await a.openai(key).files.list()).data.length, 3);
  } finally {
    await a.close();
    await b.close();
    await db.drop();
  }
});
