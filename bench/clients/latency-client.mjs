// Sequential POSTs over one keep-alive connection for SECONDS; prints {p50, p90, requests} as JSON (ms).
// `node latency-client.mjs URL BODY_JSON SECONDS [KEY] [CA_FILE]`
import { readFileSync } from "node:fs";
import { Agent, request } from "undici";

const [url, body, seconds, key, caFile] = process.argv.slice(2);
const dispatcher = new Agent({ connections: 1, connect: caFile ? { ca: readFileSync(caFile, "utf8") } : {} });
const headers = { "content-type": "application/json", ...(key ? { authorization: `Bearer ${key}` } : {}) };
const samples = [];
const end = performance.now() + Number(seconds) * 1000;
// Warm the connection (TLS handshake, keep-alive) before timing.
for (let i = 0; i < 20; i++) await (await request(url, { method: "POST", headers, body, dispatcher })).body.arrayBuffer();
while (performance.now() < end) {
  const t0 = performance.now();
  const res = await request(url, { method: "POST", headers, body, dispatcher });
  await res.body.arrayBuffer();
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
  samples.push(performance.now() - t0);
}
samples.sort((a, b) => a - b);
const at = (p) => samples[Math.min(samples.length - 1, Math.floor(p * samples.length))];
console.log(JSON.stringify({ p50: at(0.5), p90: at(0.9), requests: samples.length }));
await dispatcher.close();
