// The Batch API job through the middle of the soak: `lines` chat lines uploaded and submitted at `startAt`, polled
// until the batch ends; then every custom_id's count in the output and error files, and the usage the output states.
import { record, request, settings, sleep } from "./soak-client.mjs";

const { key, keyId, lines, maxTokens, startAt } = settings;
await sleep(Math.max(0, startAt - Date.now()));

const input = Array.from({ length: lines }, (_, i) =>
  JSON.stringify({ custom_id: `line-${i}`, method: "POST", url: "/v1/chat/completions", body: { model: "stories", messages: [{ role: "user", content: `Once upon a time there was a cat number ${i}` }], max_tokens: maxTokens } }),
).join("\n");

/** Retries what a fault in the middle may refuse (a killed replica, the database away): the job itself must go through. */
async function retried(what, call) {
  for (;;) {
    try {
      const res = await call();
      if (res.ok) return res;
      process.stderr.write(`batch client: ${what}: ${res.status} ${await res.text()}\n`);
    } catch (err) {
      process.stderr.write(`batch client: ${what}: ${err.cause?.code ?? err.message}\n`);
    }
    await sleep(2000);
  }
}

const form = new FormData();
form.append("purpose", "batch");
form.append("file", new Blob([input], { type: "application/jsonl" }), "soak.jsonl");
const file = await (await retried("upload", () => request("/v1/files", { key, form }))).json();
const created = await (await retried("create", () => request("/v1/batches", { key, body: { input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" } }))).json();
const submittedAt = Date.now();
let batch = created;
while (!["completed", "failed", "expired", "cancelled"].includes(batch.status)) {
  await sleep(3000);
  batch = await (await retried("poll", () => request(`/v1/batches/${created.id}`, { key, method: "GET" }))).json();
}
const seen = new Map();
let prompt = 0;
let completion = 0;
for (const fileId of [batch.output_file_id, batch.error_file_id].filter(Boolean)) {
  const text = await (await retried("content", () => request(`/v1/files/${fileId}/content`, { key, method: "GET" }))).text();
  for (const line of text.split("\n").filter(Boolean)) {
    const parsed = JSON.parse(line);
    seen.set(parsed.custom_id, (seen.get(parsed.custom_id) ?? 0) + 1);
    const usage = parsed.response?.body?.usage;
    if (usage) {
      prompt += usage.prompt_tokens;
      completion += usage.completion_tokens;
    }
  }
}
const missing = Array.from({ length: lines }, (_, i) => `line-${i}`).filter((id) => !seen.has(id));
const repeated = [...seen].filter(([, n]) => n > 1).map(([id]) => id);
record({ t: submittedAt, ms: Date.now() - submittedAt, route: "batch", keyId, status: batch.status === "completed" ? 200 : 500, batchId: batch.id, batchStatus: batch.status, counts: batch.request_counts, lines, missing: missing.length, repeated: repeated.length, prompt, completion, batch: true });
