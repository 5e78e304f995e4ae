// Streamed chat completions one after another; prints {tokensPerSecond} as JSON: completion tokens (from the
// usage chunk) over the wall time from request to [DONE]. `node stream-client.mjs URL MODEL TOKENS REQUESTS [KEY] [CA_FILE]`
import { readFileSync } from "node:fs";
import { Agent, request } from "undici";

const [url, model, tokens, requests, key, caFile] = process.argv.slice(2);
const dispatcher = new Agent({ connect: caFile ? { ca: readFileSync(caFile, "utf8") } : {} });
const headers = { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) };
let totalTokens = 0;
let totalMs = 0;
for (let i = 0; i < Number(requests); i++) {
  const body = JSON.stringify({
    model,
    messages: [{ role: "user", content: "Once upon a time" }],
    max_tokens: Number(tokens),
    temperature: 1,
    seed: i + 1,
    stream: true,
    stream_options: { include_usage: true },
  });
  const t0 = performance.now();
  const res = await request(url, { method: "POST", headers, body, dispatcher });
  const text = await res.body.text();
  totalMs += performance.now() - t0;
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}: ${text.slice(0, 200)}`);
  const usage = text.split("\n\n").filter((f) => f.startsWith("data: {")).map((f) => JSON.parse(f.slice(6))).find((e) => e.usage)?.usage;
  totalTokens += usage.completion_tokens;
}
console.log(JSON.stringify({ tokensPerSecond: (totalTokens / totalMs) * 1000 }));
await dispatcher.close();
