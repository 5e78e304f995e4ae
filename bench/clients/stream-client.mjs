// Streamed chat completions; prints {tokensPerSecond, tokens} as JSON: completion tokens (from the usage chunk) over
// the wall time from the first request to the last [DONE], and how many there were. CONCURRENCY clients (default 1) each run REQUESTS one
// after another, so with several the figure is the aggregate.
// `node stream-client.mjs URL MODEL TOKENS REQUESTS [KEY] [CA_FILE] [CONCURRENCY]`
import { readFileSync } from "node:fs";
import { Agent, request } from "undici";

const [url, model, tokens, requests, key, caFile, concurrency = "1"] = process.argv.slice(2);
const dispatcher = new Agent({ connect: caFile ? { ca: readFileSync(caFile, "utf8") } : {} });
const headers = { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) };
let totalTokens = 0;

async function client(worker) {
  for (let i = 0; i < Number(requests); i++) {
    const body = JSON.stringify({
      model,
      messages: [{ role: "user", content: "Once upon a time" }],
      max_tokens: Number(tokens),
      temperature: 1,
      seed: worker * 1000 + i + 1,
      stream: true,
      stream_options: { include_usage: true },
    });
    const res = await request(url, { method: "POST", headers, body, dispatcher });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}: ${text.slice(0, 200)}`);
    const usage = text.split("\n\n").filter((f) => f.startsWith("data: {")).map((f) => JSON.parse(f.slice(6))).find((e) => e.usage)?.usage;
    totalTokens += usage.completion_tokens;
  }
}

const t0 = performance.now();
await Promise.all(Array.from({ length: Number(concurrency) }, (_, w) => client(w)));
console.log(JSON.stringify({ tokensPerSecond: (totalTokens / (performance.now() - t0)) * 1000, tokens: totalTokens }));
await dispatcher.close();
