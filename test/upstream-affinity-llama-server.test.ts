// test: long (35 s alone, 31 s of it CPU)
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { ChatMessage } from "../src/engines/engine.ts";
import { conversationKey } from "../src/engines/upstream/affinity-key.ts";
import { AffinityRing } from "../src/engines/upstream/affinity-ring.ts";
import { startLlamaServer, type LlamaServer } from "../harness/llama-server.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { shapedModel } from "../harness/shaped-model.ts";

/**
 * `routing: prefix-affinity` over three real llama-server processes (the SmolLM2-135M-shaped model, 2 slots each,
 * its host-memory prompt cache on by default): what each upstream evaluated and found cached is read from
 * llama-server's own /metrics (`llamacpp:prompt_tokens_total`, `llamacpp:prompt_tokens_cached_total`).
 */
const adminToken = "Lm4Qz8Rt2Wx6Yb0Nc5Vd9Hf3Jg7Kp1Sa";
let peers: LlamaServer[] = [];
let front: TestServer;
let key: string;

before(async () => {
  peers = await Promise.all([0, 1, 2].map(() => startLlamaServer(shapedModel(), ["-c", "2048", "-np", "2", "-t", "1", "--metrics"])));
  front = await startServer({
    adminToken,
    models: [
      {
        id: "affine",
        engine: "upstream",
        capabilities: ["chat"],
        upstreams: peers.map((p) => ({ url: `${p.origin}/v1`, model: "shaped" })),
        routing: "prefix-affinity",
        health: { interval: "500ms" },
      },
    ],
  });
  key = (await front.createKey()).key;
});

after(async () => {
  await front?.close();
  await Promise.all(peers.map((p) => p.stop()));
});

interface Counters {
  evaluated: number;
  cached: number;
  predicted: number;
}

/** llama-server's own counters; a killed one reads as null. A live one is asked again (on a loaded machine one read can fail). */
async function counters(peer: LlamaServer): Promise<Counters | null> {
  let text: string | null = null;
  for (let attempt = 1; text === null; attempt++) {
    if (peer.child.exitCode !== null || peer.child.signalCode !== null) return null;
    text = await peer.fetch("/metrics").then(
      (r) => (r.ok ? r.text() : Promise.reject(new Error(`status ${r.status}`))),
      (err: unknown) => {
        if (attempt >= 5) throw new Error(`llama-server ${peer.origin} /metrics: ${String(err)}`, { cause: err });
        return null;
      },
    );
    if (text === null) await new Promise((r) => setTimeout(r, 500));
  }
  const read = (name: string) => Number(new RegExp(`^llamacpp:${name} (\\S+)$`, "m").exec(text)![1]);
  return { evaluated: read("prompt_tokens_total"), cached: read("prompt_tokens_cached_total"), predicted: read("tokens_predicted_total") };
}

const words = ["river", "garden", "lantern", "winter", "copper", "meadow", "harbor", "thunder", "velvet", "orchard", "signal", "marble"];
const text = (n: number, seed: number) => Array.from({ length: n }, (_, i) => words[(i * 7 + seed * 5 + Math.floor(i / 12) * seed) % words.length]).join(" ");
const system = { role: "system" as const, content: "You are a careful assistant. Answer briefly." };
const opening = (n: number): ChatMessage[] => [system, { role: "user", content: `Document ${n}: ${text(40, n)}` }];

/** One non-stream turn; the answer is appended to the conversation. */
async function turn(messages: ChatMessage[], maxTokens = 8): Promise<{ promptTokens: number; messages: ChatMessage[] }> {
  // A long timeout: on a loaded 2-core machine three llama-servers at 1 thread each can be slow, never stuck.
  const res = await front.openai(key, { timeout: 240_000 }).chat.completions.create({ model: "affine", messages: messages as never, max_tokens: maxTokens, temperature: 0 });
  return { promptTokens: res.usage!.prompt_tokens, messages: [...messages, { role: "assistant", content: res.choices[0].message.content! }] };
}

/** A turn run alone, with which upstream generated it (its tokens_predicted grew) and what that one found cached. */
async function observedTurn(messages: ChatMessage[]) {
  const before = await Promise.all(peers.map(counters));
  const answered = await turn(messages);
  const after = await Promise.all(peers.map(counters));
  const at = after.findIndex((c, i) => c !== null && c.predicted > before[i]!.predicted);
  return { ...answered, at, cached: after[at]!.cached - before[at]!.cached, evaluated: after[at]!.evaluated - before[at]!.evaluated };
}

const ringOrder = (messages: ChatMessage[]) => {
  const ring = new AffinityRing(peers, (p) => `${p.origin}/v1`, () => 1);
  return [...ring.walk(conversationKey(messages))].map((p) => peers.indexOf(p));
};

test("multi-turn conversations, interleaved, reuse their upstream's KV cache: llama-server reports the history as cached", async () => {
  const conversations = [0, 1, 2, 3, 4].map((n) => ({ messages: opening(n), at: -1, promptTokens: 0 }));
  for (let round = 0; round < 3; round++) {
    for (const [n, c] of conversations.entries()) {
      const messages = round === 0 ? c.messages : [...c.messages, { role: "user" as const, content: `Question ${round}: ${text(10, n + round)}` }];
      const t = await observedTurn(messages);
      if (round === 0) c.at = t.at;
      assert.equal(t.at, c.at, `conversation ${n} turn ${round + 1} stays on its upstream`);
      assert.equal(t.at, ringOrder(messages)[0], "its ring owner");
      if (round > 0) {
        assert.ok(t.cached >= c.promptTokens, `conversation ${n} turn ${round + 1}: ${t.cached} cached of ${t.promptTokens}, the previous prompt was ${c.promptTokens}`);
        assert.ok(t.evaluated < t.promptTokens - c.promptTokens, `only the new tokens are evaluated: ${t.evaluated} of ${t.promptTokens}`);
      }
      c.messages = t.messages;
      c.promptTokens = t.promptTokens;
    }
  }
});

test("SIGKILL of the affine upstream mid-conversation: 0 failed requests, the turn goes on clockwise on the ring, and stays where it went", async () => {
  let conversation = opening(50);
  const [owner, next] = ringOrder(conversation);
  const first = await observedTurn(conversation);
  assert.equal(first.at, owner);
  conversation = [...first.messages, { role: "user", content: `Question: ${text(10, 51)}` }];

  // Other conversations keep running on the pool meanwhile; none of them may fail either.
  const statuses: string[] = [];
  let stop = false;
  const background = [1, 2].map(async (w) => {
    let messages = opening(60 + w);
    while (!stop) {
      try {
        // Starting over before the history outgrows a slot's 1,024 tokens (a fast machine runs many turns meanwhile).
        if (messages.length > 16) messages = opening(60 + w);
        messages = [...(await turn(messages, 4)).messages, { role: "user", content: "And then?" }];
        statuses.push("ok");
      } catch (err) {
        statuses.push(String(err));
      }
    }
  });

  const upstreamUrl = `${peers[owner].origin}/v1`;
  const inFlight = async () => {
    const res = await front.get("/admin/v1/models/affine", { key: adminToken });
    return ((await res.json()) as { upstreams: { url: string; inFlight: number }[] }).upstreams.find((u) => u.url === upstreamUrl)!.inFlight;
  };
  const interrupted = turn(conversation, 64);
  while ((await inFlight()) === 0) await new Promise((r) => setTimeout(r, 10));
  peers[owner].child.kill("SIGKILL");
  const second = await interrupted;
  conversation = [...second.messages, { role: "user", content: `Question: ${text(10, 52)}` }];

  // The background conversations stop first: observedTurn tells the serving upstream by whose counters grew.
  stop = true;
  await Promise.all(background);
  const third = await observedTurn(conversation);
  // The retry went on clockwise: to the next upstream, or past it when the background turns had it at the load
  // bound; the conversation settled wherever that was, and its next turn goes there, where its history is cached.
  assert.notEqual(third.at, owner);
  assert.ok([next, ringOrder(conversation)[2]].includes(third.at), "an upstream after the killed one on the ring serves the conversation now");
  assert.ok(third.cached >= second.promptTokens, `it holds the turn it took over: ${third.cached} cached, that turn's prompt was ${second.promptTokens}`);
  assert.ok(statuses.length > 0);
  assert.deepEqual([...new Set(statuses)], ["ok"], "0 failed requests");
  const view = (await (await front.get("/admin/v1/models/affine", { key: adminToken })).json()) as { affinity: { retries: number } };
  assert.ok(view.affinity.retries >= 1, "the interrupted turn was retried");
});
