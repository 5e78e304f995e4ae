// test: alone (a 50 ms bound on how long the event loop is held, garbage collection included: its helper threads need spare CPU)
import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { startServer, modelsDir } from "../harness/server.ts";
import { chatBatch, finished, input, streamUpload, upload } from "./helpers/batch-files.ts";
import { describeStall, longestStall } from "./helpers/event-loop-stall.ts";

/** Issue 42.7: creating a batch never stalls the server. The official openai client where it can send what is tested. */

const stories = { engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, threads: 1 };

test("issue 42.7: a batch from a 100 MiB, 50,000-line file: the event loop is never held 50 ms (the upload streamed, the file read twice, its lines stored)", async (t) => {
  const srv = await startServer({ models: [{ id: "m", ...stories }] });
  try {
    const { key } = await srv.createKey();
    const client = srv.openai(key, { timeout: 180_000 });
    // A first batch warms the server up: the first line a node runs pays one-time costs (the chat path's first use)
    // that have nothing to do with the size of the file.
    const warm = await upload(client, input(1, 300));
    assert.equal((await finished(client, (await chatBatch(client, warm.id)).id)).status, "completed");
    const content = input(50_000, 2090);
    assert.ok(content.length > 100_000_000 && content.length <= 100 * 1024 * 1024, `${content.length} bytes`);
    let file!: { id: string; bytes: number };
    const uploading = await longestStall(async () => (file = (await streamUpload(srv, key, content)).body));
    assert.equal(file.bytes, content.length);
    let batch!: Awaited<ReturnType<typeof chatBatch>>;
    const creating = await longestStall(async () => (batch = await chatBatch(client, file.id)));
    assert.equal(batch.status, "in_progress");
    assert.equal(batch.request_counts?.total, 50_000);
    t.diagnostic(`upload: ${describeStall(uploading)}; create: ${describeStall(creating)}`);
    assert.ok(uploading.ms < 50, `the upload held the event loop ${describeStall(uploading)}`);
    assert.ok(creating.ms < 50, `creating the batch held the event loop ${describeStall(creating)}`);
  } finally {
    await srv.close();
  }
});
