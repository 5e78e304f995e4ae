import assert from "node:assert/strict";
import { test } from "node:test";
import type { ChatMessage } from "../src/engines/engine.ts";
import { conversationKey } from "../src/engines/upstream/affinity-key.ts";
import { AffinityRing, placeBounded, ringPoint, type LoadView } from "../src/engines/upstream/affinity-ring.ts";

/**
 * The placement rules of `routing: prefix-affinity` as pure functions: the conversation key, the consistent-hash
 * ring and the bounded-load placement (Mirrokni et al.). The same rules through a real pool are in
 * upstream-affinity.test.ts.
 */
interface Node {
  id: string;
  weight: number;
  inFlight: number;
  up: boolean;
}

const nodes = (n: number, weights: number[] = []): Node[] =>
  Array.from({ length: n }, (_, i) => ({ id: `https://gpu-${i}.example:8000/v1`, weight: weights[i] ?? 1, inFlight: 0, up: true }));
const ringOf = (members: Node[]) => new AffinityRing(members, (m) => m.id, (m) => m.weight);
const view: LoadView<Node> = { up: (m) => m.up, mayTake: (m) => m.up, inFlight: (m) => m.inFlight, weight: (m) => m.weight };
const keys = Array.from({ length: 20_000 }, (_, i) => ringPoint(`conversation ${i}`));

test("the key is the conversation's, not the turn's: later turns share it, a shared system prompt alone does not", () => {
  const system: ChatMessage = { role: "system", content: "You are a careful assistant." };
  const turn1: ChatMessage[] = [system, { role: "user", content: "Summarise this report: ..." }];
  const turn3: ChatMessage[] = [...turn1, { role: "assistant", content: "It says..." }, { role: "user", content: "And the costs?" }, { role: "assistant", content: "..." }, { role: "user", content: "Thanks" }];
  assert.equal(conversationKey(turn3), conversationKey(turn1));
  assert.notEqual(conversationKey([system, { role: "user", content: "Another question" }]), conversationKey(turn1));
  assert.notEqual(conversationKey([{ role: "system", content: "Another persona." }, turn1[1]]), conversationKey(turn1));
  // Text split into parts or not is the same text; an image is part of the opening.
  const image = { type: "image" as const, data: new Uint8Array([1, 2, 3]), mime: "image/png" as const, param: "p", urlParam: "u" };
  const withImage = (data: Uint8Array): ChatMessage[] => [{ role: "user", content: [{ type: "text", text: "What is this?" }, { ...image, data }] }];
  assert.equal(conversationKey(withImage(new Uint8Array([1, 2, 3]))), conversationKey([...withImage(new Uint8Array([1, 2, 3])), { role: "assistant", content: "A cat" }]));
  assert.notEqual(conversationKey(withImage(new Uint8Array([1, 2, 3]))), conversationKey(withImage(new Uint8Array([1, 2, 4]))));
});

test("placement is deterministic: the same key, the same owner, on a ring built in any order", () => {
  const members = nodes(4);
  const ring = ringOf(members);
  const shuffled = ringOf([members[2], members[0], members[3], members[1]]);
  for (const key of keys.slice(0, 2000)) {
    const owner = placeBounded(ring, key, 1.25, view)!;
    assert.equal(owner.placement, "owner");
    assert.equal(owner.member, [...ring.walk(key)][0]);
    assert.equal(placeBounded(shuffled, key, 1.25, view)!.member, owner.member);
  }
});

test("each upstream's share of keys follows its weight (160 ring points per unit of weight)", () => {
  const share = (members: Node[]) => {
    const ring = ringOf(members);
    const counts = new Map<Node, number>();
    for (const key of keys) counts.set([...ring.walk(key)][0], (counts.get([...ring.walk(key)][0]) ?? 0) + 1);
    return members.map((m) => (counts.get(m) ?? 0) / keys.length);
  };
  for (const s of share(nodes(4))) assert.ok(Math.abs(s - 0.25) < 0.04, `share ${s}`);
  const weighted = share(nodes(3, [1, 1, 2]));
  assert.ok(Math.abs(weighted[2] - 0.5) < 0.05, `weight 2 of 4: ${weighted}`);
});

test("removing one of 4 upstreams moves only the keys it held; they come back when it returns", () => {
  const members = nodes(4);
  const ring = ringOf(members);
  const before = keys.map((k) => placeBounded(ring, k, 1.25, view)!.member);
  members[1].up = false;
  const during = keys.map((k) => placeBounded(ring, k, 1.25, view)!.member);
  const moved = keys.filter((_, i) => during[i] !== before[i]).length;
  const held = before.filter((m) => m === members[1]).length;
  assert.equal(moved, held, "exactly the keys of the removed upstream moved");
  assert.ok(held / keys.length < 0.29, `its share was ${held / keys.length}`);
  for (let i = 0; i < keys.length; i++) {
    if (before[i] === members[1]) assert.equal(during[i], [...ring.walk(keys[i])][1], "to the next upstream on the ring");
  }
  members[1].up = true;
  assert.deepEqual(keys.map((k) => placeBounded(ring, k, 1.25, view)!.member), before);
});

test("bounded loads: past ceil(c × mean in flight) a request spills clockwise, and no upstream exceeds the bound", () => {
  const members = nodes(4);
  const ring = ringOf(members);
  const key = keys[7];
  const order = [...ring.walk(key)];
  // One conversation's requests held in flight. The bound counts the new request: with 2 (then 3) in flight over 4
  // upstreams it is ceil(1.25 × 2/4) = 1, so the 2nd and 3rd go on clockwise; with 4 it is 2: back to the owner.
  const placed = [];
  for (let i = 0; i < 5; i++) {
    const p = placeBounded(ring, key, 1.25, view)!;
    p.member.inFlight++;
    placed.push(p);
  }
  assert.deepEqual(placed.map((p) => p.member.id), [order[0], order[1], order[2], order[0], order[1]].map((m) => m.id));
  assert.deepEqual(placed.map((p) => p.placement), ["owner", "spill", "spill", "owner", "spill"]);

  // Many conversations at once: every upstream stays within ceil(1.25 × the mean) as the total grows.
  for (const m of members) m.inFlight = 0;
  let spills = 0;
  for (let i = 0; i < 400; i++) {
    const p = placeBounded(ring, keys[i], 1.25, view)!;
    p.member.inFlight++;
    if (p.placement === "spill") spills++;
    const total = members.reduce((n, m) => n + m.inFlight, 0);
    for (const m of members) assert.ok(m.inFlight <= Math.ceil((1.25 * total) / 4), `${m.inFlight} of ${total}`);
  }
  assert.ok(spills > 0 && spills < 400 * 0.3, `${spills} spills`);
});

test("bounded loads with weights: the bound is per unit of weight; an upstream that may not take spills", () => {
  const members = nodes(2, [1, 3]);
  const ring = ringOf(members);
  for (let i = 0; i < 200; i++) {
    const p = placeBounded(ring, keys[i], 1.25, view)!;
    p.member.inFlight++;
  }
  assert.ok(members[1].inFlight <= Math.ceil((1.25 * 200 * 3) / 4) && members[0].inFlight <= Math.ceil((1.25 * 200) / 4), `${members.map((m) => m.inFlight)}`);
  const full = { ...view, mayTake: (m: Node) => m !== members[1] };
  const key = keys.find((k) => [...ring.walk(k)][0] === members[1])!;
  assert.deepEqual(placeBounded(ring, key, 1.25, full), { member: members[0], placement: "spill" });
  assert.equal(placeBounded(ring, key, 1.25, { ...view, mayTake: () => false }), null);
});

test("a key settled past its owner (where it last spilled) goes there first while it has room, as a hit; else the ring order", () => {
  const members = nodes(3);
  const ring = ringOf(members);
  const key = keys[11];
  const [owner, next, last] = [...ring.walk(key)];
  assert.deepEqual(placeBounded(ring, key, 1.25, view, last), { member: last, placement: "owner" });
  last.inFlight = 1; // 2 in flight with the new one: the bound is ceil(1.25 × 2/3) = 1, so the settled member is full
  assert.deepEqual(placeBounded(ring, key, 1.25, view, last), { member: owner, placement: "owner" });
  assert.deepEqual(placeBounded(ring, key, 1.25, { ...view, mayTake: (m) => m === next }, last), { member: next, placement: "spill" });
  last.up = false;
  assert.deepEqual(placeBounded(ring, key, 1.25, view, last), { member: owner, placement: "owner" }, "a settled member that is down is skipped");
});
