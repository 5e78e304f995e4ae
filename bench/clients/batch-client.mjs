// The batch bench's two sides, the same LINES chat requests either way; prints {linesPerSecond}.
// `node batch-client.mjs ORIGIN MODEL LINES MAX_TOKENS CONCURRENCY KEY CA_FILE MODE` where MODE is
//   client: POST /v1/chat/completions, CONCURRENCY requests in flight (the model's parallel), until all are answered;
//   batch:  upload the lines, POST /v1/batches, poll every 100 ms until completed (timed from the upload).
import { readFileSync } from "node:fs";
import { Agent, request } from "undici";

const [origin, model, lines, maxTokens, concurrency, key, caFile, mode] = process.argv.slice(2);
const dispatcher = new Agent({ connect: { ca: readFileSync(caFile, "utf8") } });
const auth = { authorization: `Bearer ${key}` };
const bodies = Array.from({ length: Number(lines) }, (_, i) => ({
  model,
  messages: [{ role: "user", content: `Once upon a time there was a ${["cat", "dog", "bird", "fox"][i % 4]} named ${i}` }],
  max_tokens: Number(maxTokens),
  temperature: 0,
}));

async function call(method, path, body, headers = {}) {
  const res = await request(`${origin}${path}`, { method, headers: { ...auth, ...headers }, body, dispatcher });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`${method} ${path}: ${res.statusCode} ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

// One warm request (TLS handshake, the model's first run) before timing.
await call("POST", "/v1/chat/completions", JSON.stringify(bodies[0]), { "content-type": "application/json" });
const started = performance.now();
if (mode === "client") {
  let next = 0;
  const worker = async () => {
    while (next < bodies.length) await call("POST", "/v1/chat/completions", JSON.stringify(bodies[next++]), { "content-type": "application/json" });
  };
  await Promise.all(Array.from({ length: Number(concurrency) }, worker));
} else {
  const jsonl = bodies.map((body, i) => JSON.stringify({ custom_id: `r${i}`, method: "POST", url: "/v1/chat/completions", body })).join("\n");
  const form = new FormData();
  form.append("purpose", "batch");
  form.append("file", new Blob([jsonl]), "bench.jsonl");
  const res = await fetch(`${origin}/v1/files`, { method: "POST", headers: auth, body: form, dispatcher });
  if (res.status !== 200) throw new Error(`upload: ${res.status} ${await res.text()}`);
  const file = await res.json();
  let batch = await call("POST", "/v1/batches", JSON.stringify({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" }), { "content-type": "application/json" });
  while (!["completed", "failed", "expired", "cancelled"].includes(batch.status)) {
    await new Promise((r) => setTimeout(r, 100));
    batch = await call("GET", `/v1/batches/${batch.id}`);
  }
  if (batch.status !== "completed" || batch.request_counts.completed !== bodies.length) throw new Error(`batch ended ${batch.status}: ${JSON.stringify(batch.request_counts)}`);
}
console.log(JSON.stringify({ linesPerSecond: bodies.length / ((performance.now() - started) / 1000) }));
await dispatcher.close();
