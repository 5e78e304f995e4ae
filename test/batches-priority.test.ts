// test: alone (interactive p95 while a batch runs within 1.5x of the p95 measured just before without it)
import { test } from "node:test";
import assert from "node:assert/strict";
import { toFile } from "openai";
import { startServer } from "../harness/server.ts";
import { startPacedUpstream } from "../harness/paced-upstream.mjs";
import { waitFor } from "./helpers/wait-for.ts";

/**
 * Issue 36: batch lines yield to interactive traffic. Interactive p95 latency while a 2,000-line batch runs is within
 * 1.5x of it with no batch: the lines run with `priority: "batch"`, which gets only the capacity interactive requests
 * leave, and leaves one slot free while interactive requests arrive (the scheduler's headroom). The model is an
 * upstream whose every completion takes 100 ms, so what is measured is the scheduler: without the headroom an
 * interactive request waits for a batch line to end (about 2x). On an in-process engine the two sequences also share
 * the CPU, which no admission order removes (see docs/api.md, the Batch API).
 */

function p95(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.95) - 1)];
}

test("issue 36 interactive p95 while a 2,000-line batch runs is within 1.5x of it with no batch", async () => {
  const paced = await startPacedUpstream({ durationMs: 100 });
  const srv = await startServer({
    models: [{ id: "stories-chat", engine: "upstream", capabilities: ["chat"], parallel: 2, upstreams: [{ url: `http://127.0.0.1:${paced.port}/v1`, model: "paced" }] }],
    batches: { pollInterval: "100ms" },
  });
  try {
    const { key } = await srv.createKey();
    const client = srv.openai(key);
    const interactive = async () => {
      const latencies: number[] = [];
      for (let i = 0; i < 30; i++) {
        const started = performance.now();
        await client.chat.completions.create({ model: "stories-chat", messages: [{ role: "user", content: `Once upon a time ${i}` }], max_tokens: 16, temperature: 0 });
        latencies.push(performance.now() - started);
      }
      return p95(latencies);
    };
    await interactive();
    const alone = await interactive();
    const lines = Array.from({ length: 2000 }, (_, i) =>
      JSON.stringify({ custom_id: `b${i}`, method: "POST", url: "/v1/chat/completions", body: { model: "stories-chat", messages: [{ role: "user", content: `The dog ${i}` }], max_tokens: 16, temperature: 0 } }),
    );
    const file = await client.files.create({ file: await toFile(Buffer.from(lines.join("\n")), "batch.jsonl"), purpose: "batch" });
    const batch = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    await waitFor(() => client.batches.retrieve(batch.id), (b) => (b.request_counts?.completed ?? 0) >= 10, "the batch running");
    const withBatch = await interactive();
    const running = await client.batches.retrieve(batch.id);
    assert.equal(running.status, "in_progress", "the batch was still running while measured");
    await client.batches.cancel(batch.id);
    assert.ok(withBatch <= 1.5 * alone, `interactive p95 ${withBatch.toFixed(0)} ms with the batch, ${alone.toFixed(0)} ms without`);
  } finally {
    await srv.close();
    paced.server.close();
  }
});
