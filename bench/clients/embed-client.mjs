// POSTs the bench's 64 sentences as one embeddings request, ROUNDS times, one after another; prints
// {inputsPerSecond}. `node embed-client.mjs URL MODEL ROUNDS|stdin KEY CA_FILE` (stdin: runs.mjs)
import { readFileSync } from "node:fs";
import { Agent, request } from "undici";
import { eachRun } from "./runs.mjs";
import { benchSentences } from "./sentences.mjs";

const [url, model, rounds, key, caFile] = process.argv.slice(2);
const dispatcher = new Agent({ connect: { ca: readFileSync(caFile, "utf8") } });
const headers = { "content-type": "application/json", authorization: `Bearer ${key}` };
const body = JSON.stringify({ model, input: benchSentences, encoding_format: "base64" });
// One warm request on the connection (TLS handshake) before timing.
await (await request(url, { method: "POST", headers, body, dispatcher })).body.arrayBuffer();
await eachRun(rounds, async (n) => {
  const started = performance.now();
  for (let i = 0; i < n; i++) {
    const res = await request(url, { method: "POST", headers, body, dispatcher });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}: ${text.slice(0, 200)}`);
  }
  return { inputsPerSecond: (n * benchSentences.length) / ((performance.now() - started) / 1000) };
});
await dispatcher.close();
