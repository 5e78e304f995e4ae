// Chat completions that hit or miss the response cache (issue 45): in `hit` mode every request is the same
// deterministic one (answered from the cache after the first), in `miss` mode each has a prompt never sent before.
// CONNECTIONS loops run for SECONDS; prints {requests, all, failed, cache: {hit, miss, bypass}, p50, p50Ttft} as JSON
// (ms; TTFT is the time to the first content chunk when STREAM is 1, else to the whole answer).
// `node cache-client.mjs URL MODEL MODE SECONDS CONNECTIONS STREAM MAX_TOKENS KEY CA_FILE [PREFIX]`
import { readFileSync } from "node:fs";
import { Agent, request } from "undici";

const [url, model, mode, seconds, connections, stream, maxTokens, key, caFile, prefix = String(process.pid)] = process.argv.slice(2);
const dispatcher = new Agent({ connections: Number(connections), connect: { ca: readFileSync(caFile, "utf8") } });
const headers = { "content-type": "application/json", authorization: `Bearer ${key}` };
const streamed = stream === "1";
let sent = 0;
let failed = 0;
const seen = { hit: 0, miss: 0, bypass: 0 };
const latencies = [];
const ttfts = [];

const body = () =>
  JSON.stringify({
    model,
    messages: [{ role: "user", content: mode === "hit" ? "Once upon a time" : `Once upon a time ${prefix} ${++sent}` }],
    max_tokens: Number(maxTokens),
    temperature: 0,
    ...(streamed ? { stream: true } : {}),
  });

async function one() {
  const t0 = performance.now();
  const res = await request(url, { method: "POST", headers, body: body(), dispatcher });
  let first = null;
  let text = "";
  for await (const chunk of res.body) {
    text += chunk;
    if (first === null && (!streamed || text.includes('"content":"') && /"content":"[^"]/.test(text))) first = performance.now();
  }
  if (res.statusCode !== 200) {
    failed++;
    return;
  }
  const status = res.headers["x-modelgate-cache"];
  if (status in seen) seen[status]++;
  latencies.push(performance.now() - t0);
  ttfts.push((first ?? performance.now()) - t0);
}

async function loop(end) {
  while (performance.now() < end) await one();
}

// Warm the connections (TLS handshakes) and, in hit mode, write the entry; `all` counts them (the server's CPU
// is read around the whole process).
await Promise.all(Array.from({ length: Number(connections) }, () => one()));
let all = latencies.length + failed;
latencies.length = 0;
ttfts.length = 0;
seen.hit = seen.miss = seen.bypass = 0;
const end = performance.now() + Number(seconds) * 1000;
await Promise.all(Array.from({ length: Number(connections) }, () => loop(end)));
const p50 = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
all += latencies.length + failed;
console.log(JSON.stringify({ requests: latencies.length, all, failed, cache: seen, p50: p50(latencies), p50Ttft: p50(ttfts) }));
await dispatcher.close();
