// Streamed chat completions; prints {tokensPerSecond, tokens} as JSON: completion tokens (from the usage chunk) over
// the wall time from the first request to the last [DONE], and how many there were. CONCURRENCY clients (default 1) each run REQUESTS one
// after another, so with several the figure is the aggregate.
// `node stream-client.mjs URL MODEL TOKENS REQUESTS|stdin [KEY] [CA_FILE] [CONCURRENCY]` (stdin: runs.mjs; each line
// is a run's requests per client and, optionally, the number its seeds start after)
import { readFileSync } from "node:fs";
import { Agent, request } from "undici";
import { eachRun } from "./runs.mjs";

const [url, model, tokens, requests, key, caFile, concurrency = "1"] = process.argv.slice(2);
const dispatcher = new Agent({ connect: caFile ? { ca: readFileSync(caFile, "utf8") } : {} });
const headers = { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) };
let totalTokens = 0;

async function client(worker, count, firstSeed) {
  for (let i = 0; i < count; i++) {
    const body = JSON.stringify({
      model,
      messages: [{ role: "user", content: "Once upon a time" }],
      max_tokens: Number(tokens),
      temperature: 1,
      seed: worker * 1000 + firstSeed + i + 1,
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

await eachRun(requests, async (count, firstSeed = 0) => {
  totalTokens = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: Number(concurrency) }, (_, w) => client(w, count, firstSeed)));
  return { tokensPerSecond: (totalTokens / (performance.now() - t0)) * 1000, tokens: totalTokens };
});
await dispatcher.close();
