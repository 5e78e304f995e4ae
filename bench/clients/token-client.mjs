// CLIENTS concurrent clients POSTing chat completions of mixed sizes for SECONDS, spread over the replicas; on a
// 429 a client waits Retry-After capped at 1 s and tries again (the window frees as reservations are settled). Prints JSON: the tokens
// of the admitted requests (their usage), how many were admitted, refused and failed.
// `node token-client.mjs ORIGINS(comma) KEY CA_FILE CLIENTS SECONDS MODEL`
import { readFileSync } from "node:fs";
import { Agent, request } from "undici";

const [origins, key, caFile, clients, seconds, model] = process.argv.slice(2);
const urls = origins.split(",").map((o) => `${o}/v1/chat/completions`);
const dispatcher = new Agent({ connections: Number(clients), connect: { ca: readFileSync(caFile, "utf8") } });
const headers = { "content-type": "application/json", authorization: `Bearer ${key}` };
const end = Date.now() + Number(seconds) * 1000;
const totals = { admittedTokens: 0, admitted: 0, refused: 0, failed: 0, maxRemaining: 0 };
// Mixed sizes: prompts of 40 to 2,000 characters (10–500 tokens), max_tokens of 16 to 256.
const words = "the quick brown fox jumps over the lazy dog while a little girl plays in the park ".split(" ");
const prompt = (chars) => Array.from({ length: Math.ceil(chars / 5) }, (_, i) => words[i % words.length]).join(" ").slice(0, chars);

async function client(i) {
  let n = i;
  while (Date.now() < end) {
    const chars = 40 + Math.floor(Math.random() * 1960);
    const body = JSON.stringify({ model, messages: [{ role: "user", content: prompt(chars) }], max_tokens: 16 + Math.floor(Math.random() * 240) });
    try {
      const res = await request(urls[n++ % urls.length], { method: "POST", headers, body, dispatcher });
      const text = await res.body.text();
      if (res.statusCode === 200) {
        totals.admitted++;
        totals.admittedTokens += JSON.parse(text).usage.total_tokens;
      } else if (res.statusCode === 429) {
        totals.refused++;
        await new Promise((r) => setTimeout(r, Math.min(1000, Number(res.headers["retry-after"] ?? 1) * 1000)));
      } else {
        totals.failed++;
        await new Promise((r) => setTimeout(r, 200));
      }
    } catch {
      totals.failed++;
    }
  }
}

await Promise.all(Array.from({ length: Number(clients) }, (_, i) => client(i)));
console.log(JSON.stringify(totals));
await dispatcher.close();
