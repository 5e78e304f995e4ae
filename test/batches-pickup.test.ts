import { test } from "node:test";
import assert from "node:assert/strict";
import OpenAI, { toFile } from "openai";
import { startServer } from "../harness/server.ts";
import { startPacedUpstream } from "../harness/paced-upstream.mjs";
import { BatchPickup, type PickupCandidate } from "../src/features/batches/batch-pickup.ts";
import { waitFor } from "./helpers/wait-for.ts";

/** Issue 42.4: a node's batch seats are shared between accounts by weight and tokens received, not oldest first. */

const candidates = (account: string, n: number, weight = 1, from = 0): PickupCandidate[] =>
  Array.from({ length: n }, (_, i) => ({ id: `${account}-${from + i}`, accountId: account, weight, createdAt: from + i }));

test("issue 42.4: a waiting account below its share takes the next seat, and a full node hands one back for it", () => {
  const pickup = new BatchPickup(4);
  pickup.offer(candidates("a", 6));
  const held = [1, 2, 3, 4].map(() => pickup.next()!);
  assert.deepEqual(held.map((c) => c.id), ["a-0", "a-1", "a-2", "a-3"], "alone, the account takes every seat, oldest first");
  assert.equal(pickup.handBack(4), null, "nobody else waits");
  // b arrives later than a's waiting batches (a-4, a-5): it is below its share (2 of 4 seats), a is over its own.
  pickup.offer([...candidates("a", 2, 1, 4), ...candidates("b", 1, 1, 100)]);
  assert.equal(pickup.handBack(3), null, "a seat is free: nothing to hand back");
  assert.equal(pickup.handBack(4), "a");
  pickup.released("a");
  assert.equal(pickup.next()!.id, "b-100", "the freed seat goes to b, not to a's older batches");
  pickup.offer(candidates("a", 2, 1, 4));
  assert.equal(pickup.handBack(4), null, "b has no other batch waiting: a keeps its three seats");
});

test("issue 42.4: seats follow the plans' weights, and between accounts below their share the fewer weighted tokens go first", () => {
  const pickup = new BatchPickup(4);
  pickup.offer([...candidates("light", 4, 1), ...candidates("heavy", 4, 3, 10)]);
  const taken = [1, 2, 3, 4].map(() => pickup.next()!.accountId);
  assert.deepEqual(taken.filter((a) => a === "heavy").length, 3, `weight 3 of 4 gets 3 of 4 seats: ${taken}`);
  assert.equal(pickup.handBack(4), null);

  // x and y hold a seat each; x's lines were charged 500 tokens, then its batch ended. y holds more seats now, but
  // received fewer tokens: its waiting batch goes first (without the tokens, x's would, holding none).
  const byTokens = new BatchPickup(4);
  byTokens.offer([...candidates("x", 1), ...candidates("y", 2, 1, 10)]);
  assert.deepEqual([byTokens.next()!.accountId, byTokens.next()!.accountId], ["x", "y"]);
  byTokens.charge("x", 500);
  byTokens.released("x");
  byTokens.offer([...candidates("x", 1, 1, 20), ...candidates("y", 1, 1, 11)]);
  assert.equal(byTokens.next()!.accountId, "y");
});

test("issue 42.4: another account's batch starts while one account's many batches hold every seat, and ends before them", async () => {
  const paced = await startPacedUpstream({ durationMs: 100 });
  const srv = await startServer({
    models: [{ id: "paced", engine: "upstream", capabilities: ["chat"], parallel: 4, upstreams: [{ url: `http://127.0.0.1:${paced.port}/v1`, model: "paced" }] }],
    batches: { pollInterval: "100ms" },
  });
  const lines = (tag: string, n: number) =>
    Array.from({ length: n }, (_, i) => JSON.stringify({ custom_id: `${tag}-${i}`, method: "POST", url: "/v1/chat/completions", body: { model: "paced", messages: [{ role: "user", content: `${tag} ${i}` }], max_tokens: 16 } })).join("\n");
  const create = async (client: OpenAI, content: string) => {
    const file = await client.files.create({ file: await toFile(Buffer.from(content), "input.jsonl"), purpose: "batch" });
    return client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
  };
  try {
    const a = srv.openai((await srv.createKey()).key);
    const b = srv.openai((await srv.createKey()).key);
    const heavy = [];
    for (let i = 0; i < 5; i++) heavy.push(await create(a, lines(`a${i}`, 40)));
    const store = srv.server.app.keyStore;
    const leased = () => store.db.selectFrom("batches").select("id").where("lease_owner", "is not", null).execute();
    await waitFor(leased, (rows) => rows.length === 4, "a's batches holding the node's four seats", 10_000, 20);
    const light = await create(b, lines("b", 4));
    const done = await waitFor(() => b.batches.retrieve(light.id), (x) => x.status === "completed", "b's batch to complete", 30_000, 50);
    assert.deepEqual(done.request_counts, { total: 4, completed: 4, failed: 0 });
    const heavyNow = await Promise.all(heavy.map((x) => a.batches.retrieve(x.id)));
    assert.ok(
      heavyNow.every((x) => x.status === "in_progress"),
      `b's batch ended while every batch of a was still running (a's: ${heavyNow.map((x) => `${x.status} ${x.request_counts!.completed}/40`).join(", ")})`,
    );
    for (const x of heavy) await a.batches.cancel(x.id);
  } finally {
    await srv.close();
    paced.server.closeAllConnections();
    paced.server.close();
  }
});
