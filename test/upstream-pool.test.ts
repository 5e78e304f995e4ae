// test: alone (a 429 retried on another upstream at once: two requests within 1.5 s)
import assert from "node:assert/strict";
import type { ServerResponse } from "node:http";
import { after, before, test } from "node:test";
import { apiErrorOf } from "./helpers/errors.ts";
import { json, sse, startReplay, type Replay } from "./helpers/replay-upstream.ts";
import { runCli, startServer, tempDir, writeConfig, type TestServer } from "../harness/server.ts";
import { until, waitFor } from "./helpers/wait-for.ts";

/**
 * Pool behaviour (routing, ejection, active health, retry rules) with REPLAY SERVERS as upstreams whose answers
 * each test scripts (test/helpers/replay-upstream.ts); the Modelgate node in front is real. Failover with real
 * Modelgate nodes killed under load is in upstream-failover.test.ts.
 */
const adminToken = "gmDHKvQqmH5D4N2GeN1CfxZJqx5kE-W0GlHLSxC9pnc";
let a: Replay;
let b: Replay;
let front: TestServer;
let key: string;
let rawConfig: Record<string, unknown>;

const completion = (text: string) => sse([
  { id: "x", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] },
  { id: "x", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { content: text }, finish_reason: null }] },
  { id: "x", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] },
]);
const chatPath = "/v1/chat/completions";
const calls = (r: Replay) => r.requests.filter((q) => q.path === chatPath).length;

before(async () => {
  [a, b] = await Promise.all([startReplay(), startReplay()]);
  for (const r of [a, b]) r.on("/health", json(200, {}));
  const pool = (extra: Record<string, unknown> = {}) => ({
    engine: "upstream",
    capabilities: ["chat"],
    upstreams: [{ url: a.url, model: "m" }, { url: b.url, model: "m" }],
    health: { interval: "1h" },
    ...extra,
  });
  rawConfig = {
    adminToken,
    models: [
      { id: "pair", ...pool({ routing: "round-robin" }) },
      { id: "solo", ...pool({ upstreams: [{ url: a.url, model: "m" }] }) },
      { id: "ejecting", ...pool({ routing: "round-robin", breaker: { failures: 2, cooldown: "600ms" } }) },
      { id: "checked", ...pool({ routing: "round-robin", health: { interval: "100ms", unhealthyAfter: 2, healthyAfter: 2, path: "/ready" } }) },
      { id: "least", ...pool() },
      { id: "fragile", ...pool({ routing: "round-robin", breaker: { failures: 1, cooldown: "5s" }, retry: { attempts: 1 } }) },
    ],
  };
  front = await startServer(rawConfig);
  key = (await front.createKey()).key;
});

after(async () => {
  await front?.close();
  await Promise.all([a?.close(), b?.close()]);
});

function reset(): void {
  a.requests.length = 0;
  b.requests.length = 0;
}

const ask = (model: string) => front.openai(key).chat.completions.create({ model, messages: [{ role: "user", content: "Hi" }] });
const upstreamsOf = async (model: string) => {
  const res = await front.get(`/admin/v1/models/${model}`, { key: adminToken });
  return ((await res.json()) as { upstreams: { url: string; state: string; inFlight: number; recentFailures: number }[] }).upstreams;
};

test("a 429 with Retry-After: 2 is retried on another upstream at once", async () => {
  reset();
  a.on(chatPath, json(429, { error: { message: "slow down" } }, { "retry-after": "2" }));
  b.on(chatPath, completion("from b"));
  const started = Date.now();
  for (let i = 0; i < 2; i++) assert.equal((await ask("pair")).choices[0].message.content, "from b");
  assert.ok(Date.now() - started < 1500, `took ${Date.now() - started} ms`);
  assert.equal(calls(a), 2, "round robin sent each first attempt to a");
  assert.equal(calls(b), 2, "and each was retried on b without waiting out a's Retry-After");
});

test("with one upstream, a 429 with Retry-After: 2 is retried on it after at least 2 s", async () => {
  reset();
  let n = 0;
  a.on(chatPath, (req, res) => (n++ === 0 ? json(429, { error: { message: "slow down" } }, { "retry-after": "2" })(req, res) : completion("second try")(req, res)));
  const started = Date.now();
  assert.equal((await ask("solo")).choices[0].message.content, "second try");
  assert.ok(Date.now() - started >= 2000, `retried after ${Date.now() - started} ms`);
  assert.equal(calls(a), 2);
});

test("a 400 is never retried", async () => {
  reset();
  a.on(chatPath, json(400, { error: { message: "bad top_p", param: "top_p" } }));
  b.on(chatPath, json(400, { error: { message: "bad top_p", param: "top_p" } }));
  const err = await apiErrorOf(ask("pair"));
  assert.equal(err.status, 400);
  assert.equal(calls(a) + calls(b), 1);
});

test("an upstream answering 503 is ejected after `failures`, probed after `cooldown`, and restored", async () => {
  reset();
  a.on(chatPath, json(503, { error: { message: "overloaded" } }));
  b.on(chatPath, completion("b"));
  for (let i = 0; i < 8; i++) assert.equal((await ask("ejecting")).choices[0].message.content, "b", "no client request fails");
  assert.equal(calls(a), 2, "a got requests until its second failure, then none");
  assert.equal((await upstreamsOf("ejecting"))[0].state, "ejected");

  a.on(chatPath, completion("a"));
  await waitFor(() => upstreamsOf("ejecting"), (u) => u[0].state === "probing", "the 600 ms cooldown to end", 5000);
  const answers = [];
  for (let i = 0; i < 6; i++) answers.push((await ask("ejecting")).choices[0].message.content);
  assert.equal((await upstreamsOf("ejecting"))[0].state, "healthy");
  assert.ok(answers.filter((x) => x === "a").length >= 2, `traffic is back on a: ${answers.join(",")}`);
});

test("active health: failed checks eject an upstream, passing checks restore it", async () => {
  reset();
  a.on(chatPath, completion("a"));
  b.on(chatPath, completion("b"));
  a.on("/ready", json(503, { status: "loading" }));
  b.on("/ready", json(200, {}));
  await waitFor(() => upstreamsOf("checked"), (u) => u[0].state === "ejected" && u[1].state === "healthy", "two failed checks of a, two passing of b", 5000);
  for (let i = 0; i < 4; i++) assert.equal((await ask("checked")).choices[0].message.content, "b");
  a.on("/ready", json(200, {}));
  await waitFor(() => upstreamsOf("checked"), (u) => u[0].state === "healthy", "two passing checks", 5000);
  const answers = [];
  for (let i = 0; i < 4; i++) answers.push((await ask("checked")).choices[0].message.content);
  assert.ok(answers.includes("a"), answers.join(","));
});

test("issue 42.14 least-outstanding: an upstream 5x slower gets a smaller share (a fake clock: the fast one answers in 1 tick, the slow one in 5)", async () => {
  reset();
  // Both upstreams hold every request until its tick; the clock moves on only once each client's request is held,
  // so the share is the routing's alone, whatever this machine's load makes of real time.
  let now = 0;
  const held: { due: number; answer: () => void }[] = [];
  const after = (ticks: number, text: string) => (req: unknown, res: ServerResponse) => held.push({ due: now + ticks, answer: () => completion(text)(req as never, res) });
  a.on(chatPath, after(1, "fast"));
  b.on(chatPath, after(5, "slow"));
  let running = 8;
  const clients = Array.from({ length: running }, async () => {
    for (let i = 0; i < 12; i++) await ask("least");
    running--;
  });
  while (running > 0) {
    await until(() => held.length === running, "every running client's request to be held", 10_000, 2);
    now++;
    for (const due of held.filter((h) => h.due <= now)) {
      held.splice(held.indexOf(due), 1);
      due.answer();
    }
  }
  await Promise.all(clients);
  const fast = calls(a);
  const slow = calls(b);
  assert.equal(fast + slow, 96);
  assert.ok(fast >= 2 * slow, `fast ${fast}, slow ${slow}`);
});

test("every upstream ejected: 503 overloaded with the shortest cooldown left as Retry-After; /readyz stays 200", async () => {
  reset();
  a.on(chatPath, json(500, { error: { message: "down" } }));
  b.on(chatPath, json(500, { error: { message: "down" } }));
  for (let i = 0; i < 2; i++) assert.equal((await apiErrorOf(ask("fragile"))).status, 503);
  assert.equal(calls(a) + calls(b), 2);
  const res = await front.post("/v1/chat/completions", { model: "fragile", messages: [{ role: "user", content: "Hi" }] }, { key });
  assert.equal(res.status, 503);
  assert.equal(((await res.json()) as { error: { code: string } }).error.code, "overloaded");
  const retryAfter = Number(res.headers.get("retry-after"));
  assert.ok(retryAfter >= 4 && retryAfter <= 5, `Retry-After ${retryAfter}: the cooldown left`);
  assert.equal(calls(a) + calls(b), 2, "nothing was sent to an ejected upstream");
  const ready = await front.get("/readyz", { key: adminToken });
  assert.equal(ready.status, 200, "an engine behind the node being down does not take the node out of its balancer");
  const body = (await ready.json()) as { models: { id: string; upstreams?: { state: string }[] }[] };
  assert.deepEqual(body.models.find((m) => m.id === "fragile")!.upstreams!.map((u) => u.state), ["ejected", "ejected"]);
});

test("modelgate models list shows each upstream of a pool with its state and load", async () => {
  const file = writeConfig(tempDir("pool-cli-"), { ...rawConfig, dataDir: front.config.dataDir });
  const out = await runCli(["models", "list", "--config", file, "--server", front.origin]);
  assert.equal(out.code, 0, out.stderr);
  const lines = out.stdout.split("\n");
  const at = lines.findIndex((l) => l.startsWith("fragile "));
  assert.match(lines[at], /^fragile\s+upstream\s+loaded/);
  assert.match(lines[at + 1], new RegExp(`^  ${a.url.replace(/[.]/g, "\\.")}\\s+ejected\\s+0/64 in flight, \\d+ failed/min`));
  assert.match(lines[at + 2], new RegExp(`^  ${b.url.replace(/[.]/g, "\\.")}\\s+ejected`));
});
