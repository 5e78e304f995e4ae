// test: alone (health checks every 250 ms, two missed eject an upstream: a slow event loop ejects them all)
import assert from "node:assert/strict";
import type { IncomingMessage, ServerResponse } from "node:http";
import { after, before, test } from "node:test";
import type { ChatMessage } from "../src/engines/engine.ts";
import { conversationKey } from "../src/engines/upstream/affinity-key.ts";
import { AffinityRing } from "../src/engines/upstream/affinity-ring.ts";
import { json, sse, startReplay, type Replay } from "./helpers/replay-upstream.ts";
import { startServer, type TestServer } from "../harness/server.ts";

/**
 * `routing: prefix-affinity` through a real Modelgate node, with four REPLAY SERVERS as upstreams, so that a test
 * can hold answers in flight and fail an upstream at will. Each answer names the upstream that gave it. Real
 * llama-server upstreams (cache reuse, SIGKILL) are in upstream-affinity-llama-server.test.ts.
 */
const adminToken = "Tq3Wm7Zx1Rb5Nc9Vf2Hd6Jg0Kp4Ls8Ya";
const chatPath = "/v1/chat/completions";
let replays: Replay[] = [];
let front: TestServer;
let key: string;

const completion = (text: string) =>
  sse([
    { id: "x", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { role: "assistant", content: text }, finish_reason: null }] },
    { id: "x", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] },
  ]);
const answerAll = () => replays.forEach((r, i) => r.on(chatPath, completion(`upstream ${i}`)));
const healthAll = () => replays.forEach((r) => r.on("/health", json(200, {})));

before(async () => {
  replays = await Promise.all([0, 1, 2, 3].map(() => startReplay()));
  healthAll();
  answerAll();
  front = await startServer({
    adminToken,
    models: [
      {
        id: "affine",
        engine: "upstream",
        capabilities: ["chat"],
        upstreams: replays.map((r) => ({ url: r.url, model: "m" })),
        routing: "prefix-affinity",
        // Two missed checks of 250 ms eject: one slow answer on a loaded machine must not (it did at 100 ms and 1).
        health: { interval: "250ms", unhealthyAfter: 2, healthyAfter: 1 },
      },
    ],
  });
  key = (await front.createKey()).key;
});

after(async () => {
  await front?.close();
  await Promise.all(replays.map((r) => r.close()));
});

const system = { role: "system" as const, content: "You answer in one line." };
const opening = (n: number): ChatMessage[] => [system, { role: "user", content: `Conversation ${n}: tell me about river ${n * 7}.` }];
const ringOrder = (messages: ChatMessage[]) => {
  const ring = new AffinityRing(replays, (r) => r.url, () => 1);
  return [...ring.walk(conversationKey(messages))].map((r) => replays.indexOf(r));
};

/** One turn; resolves with the index of the upstream that answered. */
async function turn(messages: ChatMessage[]): Promise<number> {
  const res = await front.openai(key).chat.completions.create({ model: "affine", messages: messages as never, max_tokens: 4 });
  return Number(/upstream (\d)/.exec(res.choices[0].message.content!)![1]);
}

const followUp = (messages: ChatMessage[], answer: number, n: number): ChatMessage[] => [...messages, { role: "assistant", content: `upstream ${answer}` }, { role: "user", content: `Follow-up ${n}?` }];

async function affinityView() {
  const res = await front.get("/admin/v1/models/affine", { key: adminToken });
  return (await res.json()) as {
    affinity: { placements: number; spills: number; retries: number; hitRatio: number | null };
    upstreams: { url: string; state: string; inFlight: number; affinity: { owner: number; spill: number; retry: number } }[];
  };
}

async function until(condition: () => Promise<boolean> | boolean, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test("prefix-affinity: every turn of a conversation goes to its ring owner; conversations sharing a system prompt spread", async () => {
  const before = (await affinityView()).affinity;
  const owners = new Set<number>();
  for (let n = 0; n < 24; n++) {
    let messages = opening(n);
    const expected = ringOrder(messages)[0];
    for (let t = 0; t < 3; t++) {
      const at = await turn(messages);
      assert.equal(at, expected, `conversation ${n}, turn ${t + 1}`);
      messages = followUp(messages, at, t);
    }
    owners.add(expected);
  }
  assert.ok(owners.size >= 3, `24 conversations with one system prompt reached ${owners.size} upstreams`);
  const view = await affinityView();
  assert.equal(view.affinity.placements - (before?.placements ?? 0), 72);
  assert.equal(view.affinity.spills - (before?.spills ?? 0), 0);
  assert.equal(view.affinity.hitRatio, 1);
});

test("the load bound: a conversation's concurrent requests spill clockwise past ceil(1.25 × mean in flight); its next turn goes where the last one ran, then home", async () => {
  const held: { at: number; release(): void }[] = [];
  replays.forEach((r, i) => r.on(chatPath, (req: IncomingMessage, res: ServerResponse) => held.push({ at: i, release: () => completion(`upstream ${i}`)(req, res) })));
  const messages = opening(100);
  const order = ringOrder(messages);
  const before = (await affinityView()).affinity;
  const pending: Promise<Response>[] = [];
  try {
    for (let i = 0; i < 5; i++) {
      pending.push(front.post("/v1/chat/completions", { model: "affine", messages, max_tokens: 4 }, { key }));
      await until(() => held.length === i + 1, `request ${i + 1} to reach an upstream`);
    }
    // In flight including the new one: 1 → bound 1 (owner); 2, 3 → bound 1 (spill clockwise); 4 → bound 2 (owner); 5 → bound 2.
    assert.deepEqual(held.map((h) => h.at), [order[0], order[1], order[2], order[0], order[1]]);
    const view = await affinityView();
    assert.deepEqual(view.upstreams.map((u) => u.inFlight).sort(), [0, 1, 2, 2]);
    assert.equal(view.affinity.spills - before.spills, 3);
  } finally {
    answerAll();
    // Answered in order, so the last to run is the 5th, which spilled to order[1].
    for (const [i, h] of held.entries()) {
      h.release();
      if (held.length === 5) assert.equal((await pending[i]).status, 200);
    }
  }
  assert.equal(await turn(messages), order[1], "with nothing in flight, where its last turn ran (its newest cache): counted as a hit");
  const after = (await affinityView()).affinity;
  assert.equal(after.spills - before.spills, 3);
  assert.equal(after.placements - before.placements, 6);
});

test("a retry goes to the next upstream on the ring, not back to the same one", async () => {
  const messages = opening(200);
  const [owner, next] = ringOrder(messages);
  replays[owner].on(chatPath, json(503, { error: { message: "busy" } }));
  const calls = () => replays.map((r) => r.requests.filter((q) => q.path === chatPath).length);
  const before = calls();
  const retriesBefore = (await affinityView()).affinity.retries;
  try {
    assert.equal(await turn(messages), next);
  } finally {
    answerAll();
  }
  const delta = calls().map((c, i) => c - before[i]);
  assert.deepEqual(delta, replays.map((_, i) => (i === owner || i === next ? 1 : 0)));
  assert.equal((await affinityView()).affinity.retries - retriesBefore, 1);
});

test("removing one of 4 upstreams moves only the keys it held (plus the bound's spills); they return with it, the spilled ones stay where they ran", async () => {
  const conversations = Array.from({ length: 120 }, (_, n) => opening(1000 + n));
  const first: number[] = [];
  for (const messages of conversations) first.push(await turn(messages));
  const gone = 2;
  const held = first.filter((at) => at === gone).length;
  let second: number[] = [];
  replays[gone].on("/health", json(503, { status: "down" }));
  try {
    await until(async () => (await affinityView()).upstreams[gone].state === "ejected", "the upstream to be ejected");
    const spillsBefore = (await affinityView()).affinity.spills;
    // Concurrently (8 at a time), so that the bound spills some.
    second = new Array(conversations.length);
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < conversations.length) {
          const n = next++;
          second[n] = await turn(followUp(conversations[n], first[n], 1));
        }
      }),
    );
    const spills = (await affinityView()).affinity.spills - spillsBefore;
    assert.ok(!second.includes(gone), "nothing reached the ejected upstream");
    const movedOthers = conversations.filter((_, n) => first[n] !== gone && second[n] !== first[n]).length;
    assert.ok(movedOthers <= spills, `${movedOthers} keys of the remaining upstreams moved, ${spills} spills`);
    const moved = conversations.filter((_, n) => second[n] !== first[n]).length;
    assert.ok(moved <= held + spills, `moved ${moved} of ${conversations.length}: held by the removed one ${held}, spills ${spills}`);
  } finally {
    healthAll();
  }
  await until(async () => (await affinityView()).upstreams[gone].state === "healthy", "the upstream to return");
  const third: number[] = [];
  for (const [n, messages] of conversations.entries()) third.push(await turn(followUp(messages, first[n], 2)));
  // A key whose second turn spilled (ran past its owner of the time: the first upstream up on its ring) stays where
  // that turn ran; every other key is back on its owner, the returned upstream's included.
  const expected = conversations.map((messages, n) => (second[n] !== ringOrder(messages).find((i) => i !== gone) ? second[n] : first[n]));
  assert.deepEqual(third, expected, "every key is back on its owner, or where it spilled");
});

test("metrics: placements by upstream and outcome, and the hit ratio", async () => {
  const res = await front.get("/metrics", { key: adminToken });
  const text = await res.text();
  const view = await affinityView();
  for (const [i, u] of view.upstreams.entries()) {
    for (const placement of ["owner", "spill", "retry"] as const) {
      const line = `modelgate_upstream_affinity_placements_total{model="affine",upstream="${replays[i].url}",placement="${placement}"} ${u.affinity[placement]}`;
      assert.ok(text.includes(line), `missing ${line}`);
    }
  }
  const ratio = Number(/modelgate_upstream_affinity_hit_ratio\{model="affine"\} ([\d.e-]+)/.exec(text)![1]);
  assert.ok(Math.abs(ratio - view.affinity.hitRatio!) < 1e-9);
  assert.match(text, /modelgate_upstream_in_flight\{model="affine",upstream="[^"]+"\} 0/);
});
