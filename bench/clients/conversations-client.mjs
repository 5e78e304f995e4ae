// Multi-turn conversations against one model of a gateway, for the affinity bench (issue 34). CONVERSATIONS
// conversations of TURNS turns run in rounds: round r sends every conversation's turn r, CONCURRENCY at a time, in
// an order rotated by r, and the next round starts when the round is over, so a conversation's next turn always
// comes after the others' turns. Every conversation shares the system prompt and opens with its own document
// (~600 tokens), then user turns of ~150 tokens; answers are ANSWER tokens (the shaped model never stops early).
// Between rounds it reads the upstreams' own counters (llama-server's /metrics), so "evaluated" is what the
// upstreams computed, whatever the machine's noise. Prints one JSON object.
// `node conversations-client.mjs URL MODEL SEED KEY CA_FILE UPSTREAM_ORIGINS(comma-separated) [CONVERSATIONS TURNS CONCURRENCY ANSWER]`
import { readFileSync } from "node:fs";
import { Agent, request } from "undici";

const [url, model, seed, key, caFile, origins, conversations = "12", turns = "4", concurrency = "6", answer = "32"] = process.argv.slice(2);
const N = Number(conversations);
const TURNS = Number(turns);
const W = Number(concurrency);
const ANSWER = Number(answer);
const upstreams = origins.split(",");
const dispatcher = new Agent({ connect: { ca: readFileSync(caFile, "utf8") } });
const headers = { "content-type": "application/json", authorization: `Bearer ${key}` };

// mulberry32: the same words for the same seed, different words for every conversation, side and run.
function rng(s) {
  return () => {
    s = (s + 0x6d2b79f5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const vocabulary = ("river garden lantern winter copper meadow harbor thunder velvet orchard signal marble forest candle silver " +
  "island morning bridge pepper engine valley shadow violet rocket ladder summer button planet mirror castle").split(" ");
const words = (random, n) => Array.from({ length: n }, (_, i) => vocabulary[Math.floor(random() * vocabulary.length)] + (i % 12 === 11 ? "." : "")).join(" ");

// About 4.6 tokens per word with the SmolLM2 tokenizer on these words: 112 words ≈ 600 tokens, 32 ≈ 150.
const system = { role: "system", content: "You are a careful assistant. Read the document the user gives you, then answer each question about it in one short paragraph." };
const chats = Array.from({ length: N }, (_, c) => {
  const random = rng(Number(seed) * 1000 + c);
  return { random, messages: [system, { role: "user", content: `Document ${c}:\n${words(random, 112)}\n\nWhat is this document about?` }], prompts: [], completions: [], ttft: [] };
});

async function counters() {
  return Promise.all(
    upstreams.map(async (origin) => {
      const text = await (await fetch(`${origin}/metrics`)).text();
      const read = (name) => Number(new RegExp(`^llamacpp:${name} (\\S+)$`, "m").exec(text)[1]);
      return { evaluated: read("prompt_tokens_total"), cached: read("prompt_tokens_cached_total"), predicted: read("tokens_predicted_total") };
    }),
  );
}
const diff = (after, before, field) => after.map((a, i) => a[field] - before[i][field]);
const sum = (values) => values.reduce((a, b) => a + b, 0);

async function turn(chat) {
  const t0 = performance.now();
  const body = JSON.stringify({ model, messages: chat.messages, max_tokens: ANSWER, temperature: 0, stream: true, stream_options: { include_usage: true } });
  const res = await request(url, { method: "POST", headers, dispatcher, body });
  let ttft = -1;
  let text = "";
  for await (const chunk of res.body) {
    text += chunk;
    if (ttft < 0 && /"content":"[^"]/.test(text)) ttft = performance.now() - t0;
  }
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}: ${text.slice(0, 300)}`);
  const frames = text.split("\n\n").filter((f) => f.startsWith("data: {")).map((f) => JSON.parse(f.slice(6)));
  const error = frames.find((f) => f.error);
  if (error) throw new Error(`stream error: ${JSON.stringify(error.error)}`);
  const usage = frames.find((f) => f.usage)?.usage;
  chat.ttft.push(ttft);
  chat.prompts.push(usage.prompt_tokens);
  chat.completions.push(usage.completion_tokens);
  chat.messages.push({ role: "assistant", content: frames.map((f) => f.choices?.[0]?.delta?.content ?? "").join("") });
}

const snapshots = [await counters()];
const started = performance.now();
for (let round = 0; round < TURNS; round++) {
  if (round > 0) for (const chat of chats) chat.messages.push({ role: "user", content: `Question ${round}: ${words(chat.random, 32)}?` });
  const order = Array.from({ length: N }, (_, i) => chats[(i + round) % N]);
  let next = 0;
  await Promise.all(Array.from({ length: W }, async () => {
    while (next < order.length) await turn(order[next++]);
  }));
  snapshots.push(await counters());
}
const wallMs = performance.now() - started;
await dispatcher.close();

const [first, afterFirst, last] = [snapshots[0], snapshots[1], snapshots.at(-1)];
const later = chats.flatMap((c) => c.ttft.slice(1)).sort((a, b) => a - b);
const p50 = later.length % 2 ? later[(later.length - 1) / 2] : (later[later.length / 2 - 1] + later[later.length / 2]) / 2;
// Requests per upstream are counted from its generated tokens: every answer must be exactly ANSWER tokens.
if (chats.some((c) => c.completions.some((n) => n !== ANSWER))) throw new Error(`an answer was not ${ANSWER} tokens`);
// The least a perfect cache could evaluate in turns 2+: the new tokens only (the last prompt and its answer were cached).
const minimum = sum(chats.flatMap((c) => c.prompts.slice(1).map((p, t) => Math.max(0, p - c.prompts[t] - c.completions[t]))));
const requests = diff(last, first, "predicted").map((p) => p / ANSWER);
console.log(
  JSON.stringify({
    ttftLaterP50: p50,
    evaluatedLater: sum(diff(last, afterFirst, "evaluated")),
    cachedLater: sum(diff(last, afterFirst, "cached")),
    minimumLater: minimum,
    tokensPerSecond: (sum(chats.flatMap((c) => [...c.prompts, ...c.completions])) / wallMs) * 1000,
    requests,
    busiestShare: Math.max(...requests) / (sum(requests) / requests.length),
    firstPrompt: Math.round(sum(chats.map((c) => c.prompts[0])) / N),
    lastPrompt: Math.round(sum(chats.map((c) => c.prompts.at(-1))) / N),
    wallMs,
    // Per round: what each upstream evaluated and served, and the round's TTFTs (ms, sorted), for diagnosis.
    rounds: snapshots.slice(1).map((after, r) => ({
      evaluated: diff(after, snapshots[r], "evaluated"),
      requests: diff(after, snapshots[r], "predicted").map((p) => p / ANSWER),
      ttft: chats.map((c) => Math.round(c.ttft[r])).sort((a, b) => a - b),
    })),
  }),
);
