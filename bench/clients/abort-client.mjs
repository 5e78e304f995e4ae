// Streamed chat completions cut by the client once their first bytes arrive, `total` of them, `concurrency` at a
// time: the memory bench's load. `node abort-client.mjs URL MODEL TOTAL CONCURRENCY KEY CA_FILE`; prints {aborted}.
import { readFileSync } from "node:fs";
import { Agent, request } from "undici";

const [url, model, total, concurrency, key, caFile] = process.argv.slice(2);
const dispatcher = new Agent({ connect: { ca: readFileSync(caFile, "utf8") } });
const body = JSON.stringify({ model, messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 400, stream: true });
let left = Number(total);
let aborted = 0;
await Promise.all(
  Array.from({ length: Number(concurrency) }, async () => {
    while (left-- > 0) {
      const controller = new AbortController();
      const res = await request(url, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${key}` }, body, dispatcher, signal: controller.signal });
      if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}: ${await res.body.text()}`);
      for await (const _ of res.body) break;
      controller.abort();
      aborted++;
    }
  }),
);
console.log(JSON.stringify({ aborted }));
await dispatcher.close();
