// test: alone (a wait estimated past maxQueueWait is refused at arrival, within 1 s)
import { test } from "node:test";
import assert from "node:assert/strict";
import pino from "pino";
import type { FastifyBaseLogger } from "fastify";
import { ModelRunner } from "../src/scheduler/model-runner.ts";
import type { Lease, Priority, RefusalReason, RunnerObserver } from "../src/scheduler/runner-types.ts";
import { burstTokens, VtcQueue } from "../src/scheduler/vtc-queue.ts";
import type { ModelEntry } from "../src/config/app-config.ts";
import type { Engine } from "../src/engines/engine.ts";
import { llamaChatSupport } from "../src/engines/llama/llama.support.ts";
import { AppError } from "../src/errors/app-error.ts";
import { modelEntry } from "./helpers/model-entry.ts";
import { holdSlot } from "./helpers/runner.ts";
import { until } from "./helpers/wait-for.ts";

/*
 * The account-fair scheduler (src/scheduler/vtc-queue.ts) through ModelRunner.execute, with a scripted engine: each
 * request charges its prompt at admission and one completion token per event-loop turn, as a generation would.
 */

const log = pino({ level: "silent" }) as unknown as FastifyBaseLogger;

function entry(over: Partial<ModelEntry> = {}): ModelEntry {
  return modelEntry({ id: "m", engine: "llama", source: "x", capabilities: ["chat"], parallel: 2, queueSize: 64 }, { path: null, ...over });
}

const idleEngine = async (): Promise<Engine> => ({ support: llamaChatSupport, contextSize: 16, load: async () => {}, unload: async () => {} });

/** Records what the runner reports: tokens served per account and priority, refusals by reason. */
function observe(): { observer: RunnerObserver; served: Map<string, number>; byPriority: Map<Priority, number>; refusals: RefusalReason[] } {
  const served = new Map<string, number>();
  const byPriority = new Map<Priority, number>();
  const refusals: RefusalReason[] = [];
  return {
    served,
    byPriority,
    refusals,
    observer: {
      queueWait: () => {},
      loaded: () => {},
      unloaded: () => {},
      refused: (_m, reason) => void refusals.push(reason),
      served: (_m, account, priority, tokens) => {
        served.set(account, (served.get(account) ?? 0) + tokens);
        byPriority.set(priority, (byPriority.get(priority) ?? 0) + tokens);
      },
    },
  };
}

/** A deterministic pseudo-random sequence (mulberry32). */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

/** One scripted request: `prompt` tokens charged at admission, then `completion` tokens, one per turn. */
function generate(runner: ModelRunner, account: string, weight: number, prompt: number, completion: number, priority: Priority = "interactive") {
  return runner.execute({
    queueKey: `${account}-key`,
    account,
    weight,
    priority,
    signal: new AbortController().signal,
    prepare: () => prompt,
    cost: (p) => p,
    run: async (_engine, _prepared, lease) => {
      for (let i = 0; i < completion; i++) {
        await tick();
        lease.charge(1);
      }
    },
  });
}

/**
 * Closed-loop clients: each account keeps `clients` requests outstanding (always backlogged) until `total`
 * requests have finished; returns the service each account received by then.
 */
async function backlogged(runner: ModelRunner, served: Map<string, number>, accounts: { id: string; weight: number; clients: number; size: () => [number, number] }[], total: number) {
  let finished = 0;
  let snapshot: Map<string, number> | null = null;
  const loops = accounts.flatMap((a) =>
    Array.from({ length: a.clients }, async () => {
      while (finished < total) {
        const [prompt, completion] = a.size();
        await generate(runner, a.id, a.weight, prompt, completion);
        if (++finished === total) snapshot = new Map(served);
      }
    }),
  );
  await Promise.all(loops);
  return snapshot!;
}

test("fair share: two backlogged accounts with weights 2:1 get service within 10% of 2:1 over 200 requests of mixed lengths", async () => {
  const { observer, served } = observe();
  const runner = new ModelRunner(entry({ parallel: 2 }), llamaChatSupport, idleEngine, log, observer);
  await runner.load();
  const random = rng(31);
  const mixed = (): [number, number] => [5 + Math.floor(random() * 60), 5 + Math.floor(random() * 150)];
  const got = await backlogged(runner, served, [
    { id: "gold", weight: 2, clients: 8, size: mixed },
    { id: "free", weight: 1, clients: 8, size: mixed },
  ], 200);
  const ratio = got.get("gold")! / got.get("free")!;
  assert.ok(Math.abs(ratio - 2) / 2 <= 0.1, `gold:free service ${got.get("gold")}:${got.get("free")} = ${ratio.toFixed(3)}, want 2 ± 10%`);
});

test("fair share: long requests from one account and short ones from another still split the tokens evenly", async () => {
  const { observer, served } = observe();
  const runner = new ModelRunner(entry({ parallel: 2 }), llamaChatSupport, idleEngine, log, observer);
  await runner.load();
  const got = await backlogged(runner, served, [
    { id: "long", weight: 1, clients: 4, size: () => [100, 300] },
    { id: "short", weight: 1, clients: 8, size: () => [5, 10] },
  ], 200);
  const ratio = got.get("long")! / got.get("short")!;
  assert.ok(Math.abs(ratio - 1) <= 0.1, `long:short service ${got.get("long")}:${got.get("short")} = ${ratio.toFixed(3)}, want 1 ± 10%`);
});

test("fair share: an idle account banks no credit; it re-enters at the lowest counter of those waiting", () => {
  let now = 0;
  const q = new VtcQueue<string>(16, 600_000, () => now);
  // a and b both waiting; a has received 1000 tokens, b 400: b is served next.
  q.push("a", 1, "interactive", "a1");
  q.push("b", 1, "interactive", "b1");
  q.charge("a", 1000);
  q.charge("b", 400);
  assert.equal(q.shift()!.item, "b1");
  // c was idle all along (counter 0): it enters at the minimum of the waiting accounts (a's 1000), not below it,
  // so it does not take every slot until it has caught up with a's 1000 tokens.
  q.push("c", 1, "interactive", "c1");
  q.push("c", 1, "interactive", "c2");
  q.push("a", 1, "interactive", "a2");
  now = 1;
  const first = q.shift()!.item;
  q.charge(first.startsWith("a") ? "a" : "c", 50);
  const second = q.shift()!.item;
  assert.deepEqual([first, second].sort(), ["a1", "c1"], "a and c alternate: neither has credit over the other");
});

test("push-out: a full queue refuses the newest waiter of the heaviest account, never the light newcomer", async () => {
  const { observer, refusals } = observe();
  const runner = new ModelRunner(entry({ parallel: 1, queueSize: 4 }), llamaChatSupport, idleEngine, log, observer);
  await runner.load();
  const running = holdSlot(runner, "heavy");
  await running.running;
  const heavy = Array.from({ length: 4 }, () => holdSlot(runner, "heavy"));
  const outcomes = heavy.map((h) => h.done.then(() => "ok", (err: unknown) => (err instanceof AppError ? `${err.code}:${err.retryAfterMs! >= 1000}` : String(err))));
  await until(() => runner.stats().queueDepth === 4, "heavy fills the queue");
  // A full queue and an account over its share: heavy's own next request is refused.
  await assert.rejects(holdSlot(runner, "heavy").done, (err: unknown) => err instanceof AppError && err.code === "overloaded");
  // light's first and second requests each push out heavy's newest waiter (its share of 4 slots is 2).
  const light = [holdSlot(runner, "light"), holdSlot(runner, "light")];
  assert.equal(await outcomes[3], "overloaded:true");
  assert.equal(await outcomes[2], "overloaded:true");
  assert.equal(runner.stats().queueDepth, 4);
  // At its share, light's third request is the one refused.
  await assert.rejects(holdSlot(runner, "light").done, (err: unknown) => err instanceof AppError && err.code === "overloaded");
  assert.deepEqual(refusals, ["queue_full", "queue_full", "queue_full", "queue_full"]);
  const byAccount = Object.fromEntries(runner.stats().tenants.map((t) => [t.account, t.waiting.interactive]));
  assert.deepEqual(byAccount, { heavy: 2, light: 2 });
  running.release();
  const rest = [...heavy.slice(0, 2), ...light];
  for (const h of rest) h.release();
  await Promise.all(rest.map((h) => h.done));
});

test("priorities: batch work yields to interactive work", async () => {
  const { observer, byPriority } = observe();
  const runner = new ModelRunner(entry({ parallel: 1 }), llamaChatSupport, idleEngine, log, observer);
  await runner.load();
  const order: string[] = [];
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const job = (name: string, account: string, priority: Priority, hold = false) =>
    runner.execute({
      queueKey: name,
      account,
      priority,
      signal: new AbortController().signal,
      prepare: () => null,
      cost: () => 10,
      run: async () => {
        order.push(name);
        if (hold) await gate;
      },
    });
  const first = job("first", "x", "interactive", true);
  await until(() => runner.stats().active === 1, "first holds the slot");
  // The batch request arrived first and its account has received nothing; interactive still goes first.
  const batch = job("batch", "b", "batch");
  await until(() => runner.stats().queueDepth === 1, "batch queued");
  const interactive = job("interactive", "x", "interactive");
  release();
  await Promise.all([first, batch, interactive]);
  assert.deepEqual(order, ["first", "interactive", "batch"]);
  assert.equal(byPriority.get("batch"), 10);
  assert.equal(byPriority.get("interactive"), 20);
});

/** Lets every promise settled by now run its callbacks (setImmediate is not among the mocked timers). */
const settled = () => new Promise<void>((resolve) => setImmediate(resolve));

test("issue 42.3: an overdue batch request takes the next free slot, headroom or not, at parallel 1, 2 and 4", async (t) => {
  // The scheduler's clock is Date.now, and both it and setTimeout are mocked: ages pass only when the test says so.
  t.mock.timers.enable({ apis: ["setTimeout", "Date"], now: 0 });
  for (const parallel of [1, 2, 4]) {
    const runner = new ModelRunner(entry({ parallel, batchMaxWaitMs: 1000 }), llamaChatSupport, idleEngine, log, undefined, () => Date.now());
    await runner.load();
    const started = (h: ReturnType<typeof holdSlot>) => {
      let yes = false;
      void h.running.then(() => (yes = true));
      return () => yes;
    };
    // An interactive flood: every slot taken, and more of it waiting than there are slots.
    const running = Array.from({ length: parallel }, () => holdSlot(runner, "flood"));
    await Promise.all(running.map((h) => h.running));
    const flood = Array.from({ length: parallel + 2 }, () => holdSlot(runner, "flood"));
    const batch = holdSlot(runner, "batch", { priority: "batch" });
    const batchStarted = started(batch);
    const endOne = async () => {
      const ending = running.shift()!;
      ending.release();
      await ending.done;
      await settled();
    };
    // Not yet overdue: a freed slot goes to the flood.
    await endOne();
    running.push(flood.shift()!);
    await running.at(-1)!.running;
    assert.equal(batchStarted(), false, `parallel ${parallel}: the batch request waits while it is young`);
    // Overdue: the next freed slot is the batch request's, before the interactive waiters and whatever the headroom.
    t.mock.timers.tick(1000);
    await settled();
    assert.equal(batchStarted(), false, `parallel ${parallel}: no slot freed yet`);
    await endOne();
    assert.equal(batchStarted(), true, `parallel ${parallel}: the overdue batch request took the freed slot`);
    assert.equal(runner.stats().queueDepth, parallel + 1, `parallel ${parallel}: the flood still waits`);
    for (const h of [...running, ...flood, batch]) h.release();
    await Promise.all([...running, ...flood, batch].map((h) => h.done));

    if (parallel === 1) continue;
    // A slot free but held back as headroom (interactive work arrived just now): the batch request waiting for it
    // takes it when it falls due, without waiting for the 10 s window to close.
    const interactive = holdSlot(runner, "light");
    await interactive.running;
    const lines = Array.from({ length: parallel - 1 }, () => holdSlot(runner, "batch", { priority: "batch" }));
    await Promise.all(lines.slice(0, -1).map((h) => h.running));
    const last = lines.at(-1)!;
    const lastStarted = started(last);
    await settled();
    assert.equal(lastStarted(), false, `parallel ${parallel}: the headroom slot stays free for interactive work`);
    assert.equal(runner.stats().active, parallel - 1);
    t.mock.timers.tick(999);
    await settled();
    assert.equal(lastStarted(), false, `parallel ${parallel}: not yet due`);
    t.mock.timers.tick(1);
    await settled();
    assert.equal(lastStarted(), true, `parallel ${parallel}: the overdue batch request took the headroom slot`);
    for (const h of [interactive, ...lines]) h.release();
    await Promise.all([interactive, ...lines].map((h) => h.done));
  }
});

test("headroom: batch work alone takes every slot; once interactive work arrives, batch starts only while it leaves a slot free, so the next interactive request starts at once", async () => {
  const runner = new ModelRunner(entry({ parallel: 2 }), llamaChatSupport, idleEngine, log);
  await runner.load();
  const gates: (() => void)[] = [];
  const job = (account: string, priority: Priority) =>
    runner.execute({
      queueKey: account,
      account,
      priority,
      signal: new AbortController().signal,
      prepare: () => null,
      run: () => new Promise<void>((resolve) => gates.push(resolve)),
    });
  const batch = [job("b", "batch"), job("b", "batch"), job("b", "batch")];
  await until(() => runner.stats().active === 2 && runner.stats().queueDepth === 1, "batch alone fills both slots");
  const first = job("x", "interactive");
  await until(() => runner.stats().queueDepth === 2, "the interactive request waits for a slot");
  gates.shift()!();
  await until(() => gates.length === 2, "the freed slot went to the interactive request");
  // The batch line that ends now leaves its slot free: interactive work arrived within the headroom window.
  const batchGate = gates.shift()!;
  batchGate();
  await until(() => runner.stats().active === 1, "one slot stays free for interactive work");
  assert.equal(runner.stats().queueDepth, 1, "the third batch line still waits");
  const second = job("x", "interactive");
  await until(() => runner.stats().active === 2, "the next interactive request starts at once");
  assert.equal(runner.stats().queueDepth, 1);
  while (gates.length > 0 || runner.stats().active > 0) {
    gates.splice(0).forEach((open) => open());
    await tick();
  }
  await Promise.all([...batch, first, second]);
});

test("deadlines: no slot within maxQueueWait is 503 overloaded (deadline); an estimated wait past it is refused at arrival, with Retry-After from the drain rate", async () => {
  const { observer, refusals } = observe();
  const runner = new ModelRunner(entry({ parallel: 1, queueSize: 64, maxQueueWaitMs: 1500 }), llamaChatSupport, idleEngine, log, observer);
  await runner.load();
  // A queue that drains one request per ~100 ms.
  const timed = (account: string, ms: number) =>
    runner.execute({ queueKey: account, account, signal: new AbortController().signal, prepare: () => null, run: () => new Promise<void>((r) => setTimeout(r, ms)) });
  await Promise.all(Array.from({ length: 8 }, (_, i) => timed(`warm${i}`, 100)));

  // Waiters of distinct accounts: each new one is estimated to start after all of them (one per 100 ms).
  const held = holdSlot(runner, "holder");
  await held.running;
  const queued = Array.from({ length: 10 }, (_, i) => holdSlot(runner, `q${i}`));
  const queuedOutcome = queued.map((q) => q.done.then(() => "ok", (err: unknown) => (err instanceof AppError ? err.code : String(err))));
  await until(() => runner.stats().queueDepth === 10, "ten waiters");
  let refused: AppError | null = null;
  const arrivals = [];
  const before = performance.now();
  for (let i = 0; i < 20 && !refused; i++) {
    const h = holdSlot(runner, `late${i}`);
    arrivals.push(h);
    await Promise.race([h.done.catch((err: unknown) => (refused = err as AppError)), new Promise((r) => setTimeout(r, 5))]);
  }
  const atArrival = performance.now() - before;
  assert.ok(refused, "an arrival whose estimated wait exceeds maxQueueWait is refused");
  const err = refused as AppError;
  assert.equal(err.code, "overloaded");
  assert.ok(atArrival < 1000, `refused at arrival (${atArrival.toFixed(0)} ms), not after waiting the deadline out`);
  // ~15 waiters ahead at ~100 ms each: the estimate is the deadline or more, not a constant.
  assert.ok(err.retryAfterMs! >= 1500 && err.retryAfterMs! <= 6000, `Retry-After ${err.retryAfterMs} ms from the drain rate`);
  assert.equal(refusals.at(-1), "deadline");

  // Nobody releases the slot: the waiters get 503 overloaded once maxQueueWait has passed.
  assert.deepEqual(new Set(await Promise.all(queuedOutcome)), new Set(["overloaded"]));
  assert.ok(refusals.filter((r) => r === "deadline").length >= 11);
  for (const a of arrivals) a.release();
  held.release();
  await held.done;
  await Promise.all(arrivals.map((a) => a.done.catch(() => {})));
});

test("issue 42.5: on an engine that cannot pause, a light account's next request finds a slot: the last free one is held from a flood while the light account, seen within 10 s, runs nothing; a flood alone takes every slot", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout", "Date"], now: 0 });
  for (const engine of ["cannot pause", "pauses"] as const) {
    const create = engine === "pauses" ? async (): Promise<Engine> => ({ ...(await idleEngine()), pausableSlots: 1 }) : idleEngine;
    const runner = new ModelRunner(entry({ parallel: 4 }), llamaChatSupport, create, log, undefined, () => Date.now());
    await runner.load();
    const depth = () => [runner.stats().active, runner.stats().queueDepth];
    // The flood alone: every slot, and two waiting.
    const flood = Array.from({ length: 6 }, () => holdSlot(runner, "flood"));
    await Promise.all(flood.slice(0, 4).map((h) => h.running));
    assert.deepEqual(depth(), [4, 2], `${engine}: the flood alone takes every slot`);
    // The light account's first request waits for a slot like any (its account has received the least: it goes first).
    const first = holdSlot(runner, "light");
    flood.shift()!.release();
    await first.running;
    first.release();
    await first.done;
    await settled();
    if (engine === "pauses") {
      assert.deepEqual(depth(), [4, 1], "pauses: the flood takes the slot back (a light account starts beyond parallel instead)");
    } else {
      assert.deepEqual(depth(), [3, 2], "cannot pause: the last free slot is held from the flood");
      const second = holdSlot(runner, "light");
      await second.running;
      assert.deepEqual(depth(), [4, 2], "the light account's next request started at once, before the flood's waiter");
      // While the light account runs, nothing is held: a slot the flood frees goes to the flood's waiter.
      flood.shift()!.release();
      await settled();
      assert.deepEqual(depth(), [4, 1], "the flood's waiter took the slot its own request freed");
      second.release();
      await second.done;
      await settled();
      assert.deepEqual(depth(), [3, 1], "held again once the light account's request ended");
      t.mock.timers.tick(9_999);
      await settled();
      assert.deepEqual(depth(), [3, 1], "held while the light account was seen within 10 s");
      t.mock.timers.tick(1);
      await settled();
      assert.deepEqual(depth(), [4, 0], "the reserve lapsed: the flood's waiter took the slot");
    }
    for (const h of flood) h.release();
    await Promise.all(flood.map((h) => h.done));
    assert.equal(runner.stats().active, 0);
  }
});

test("issue 42.5: a request that can use several slots (whisper windows) leaves the reserved one free for the light account", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout", "Date"], now: 0 });
  const runner = new ModelRunner(entry({ parallel: 4 }), llamaChatSupport, idleEngine, log, undefined, () => Date.now());
  await runner.load();
  const first = holdSlot(runner, "light");
  await first.running;
  first.release();
  await first.done;
  let leased = 0;
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const wide = runner.execute({
    queueKey: "wide",
    signal: new AbortController().signal,
    prepare: () => null,
    slots: () => 4,
    run: async (_engine, _prepared, lease) => {
      leased = lease.slots;
      await gate;
    },
  });
  await settled();
  assert.equal(leased, 3, "three of the four free slots: the last is the light account's");
  const next = holdSlot(runner, "light");
  await next.running;
  assert.equal(runner.stats().active, 4);
  next.release();
  release();
  await Promise.all([next.done, wide]);
});

test("issue 42.5: what the reserve costs a flood: on 4 slots of 150-250 ms answers, A floods and B sends one every 250 ms; B never waits for a slot, and A keeps at least 0.9 of the capacity B leaves", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout", "Date"], now: 0 });
  const runner = new ModelRunner(entry({ parallel: 4, queueSize: 64 }), llamaChatSupport, idleEngine, log, undefined, () => Date.now());
  await runner.load();
  const random = rng(42);
  let stop = false;
  const done = { a: 0, b: 0 };
  const bWaits: number[] = [];
  const request = (account: "a" | "b") => {
    const asked = Date.now();
    return runner.execute({
      queueKey: account,
      signal: new AbortController().signal,
      prepare: () => null,
      run: async () => {
        if (account === "b") bWaits.push(Date.now() - asked);
        await new Promise((r) => setTimeout(r, 150 + 100 * random()));
        done[account]++;
      },
    });
  };
  // A: 16 connections, each sending its next request as soon as the last one ended.
  const flood = Array.from({ length: 16 }, async () => {
    while (!stop) await request("a");
  });
  const seconds = 30;
  const light: Promise<void>[] = [];
  for (let ms = 0; ms < seconds * 1000; ms++) {
    if (ms % 250 === 125) {
      light.push(request("b"));
      await settled();
    }
    t.mock.timers.tick(1);
    await settled();
  }
  stop = true;
  const counted = { ...done };
  while (runner.stats().active > 0 || runner.stats().queueDepth > 0) {
    t.mock.timers.tick(10);
    await settled();
  }
  await Promise.all([...flood, ...light]);
  // Alone, A would finish 4 slots ÷ 200 ms = 20 a second; B's own answers take 4 × 200 ms of it a second.
  const share = counted.a / seconds / (20 - counted.b / seconds);
  // B's first request comes from an account not seen yet: it waits like any.
  assert.equal(Math.max(...bWaits.slice(1)), 0, `B's waits for a slot: ${bWaits.join(",")}`);
  assert.ok(share >= 0.9, `A's completions ÷ the capacity B leaves: ${share.toFixed(3)} (${JSON.stringify(counted)})`);
});

test("pausing engines: an account under its share starts at once beyond parallel while another runs over its own; each lease says whether it stands over its share", async () => {
  const pausable = async (): Promise<Engine> => ({ ...(await idleEngine()), pausableSlots: 1 });
  const runner = new ModelRunner(entry({ parallel: 2 }), llamaChatSupport, pausable, log);
  await runner.load();
  const hold = (account: string, priority: Priority = "interactive") => {
    let lease: Lease | null = null;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const done = runner.execute({
      queueKey: `${account}-key`,
      account,
      priority,
      signal: new AbortController().signal,
      prepare: () => null,
      run: async (_engine, _prepared, l) => {
        lease = l;
        started();
        await gate;
      },
    });
    return { running, done, release, lease: () => lease! };
  };
  const [a1, a2] = [hold("a"), hold("a")];
  await Promise.all([a1.running, a2.running]);
  const a3 = hold("a");
  await until(() => runner.stats().queueDepth === 1, "A's third request waits: an account over its share never takes the reserve");
  assert.equal(a1.lease().overShare, false, "alone, A runs within its share");
  const b = hold("b");
  await b.running;
  assert.equal(runner.stats().active, 3, "B started at once, beyond parallel");
  assert.deepEqual([a1.lease().overShare, a2.lease().overShare, b.lease().overShare], [true, true, false]);
  assert.deepEqual([a1.lease().favoured, b.lease().favoured], [false, true]);
  // B stays favoured for a burst of service ahead of A, then shares steps again.
  b.lease().charge(burstTokens);
  assert.equal(b.lease().favoured, true);
  b.lease().charge(1);
  assert.equal(b.lease().favoured, false);
  // The reserve is taken: a third account waits, and takes it when B's request ends (before A's older waiter).
  const c = hold("c");
  await until(() => runner.stats().queueDepth === 2, "C waits");
  b.release();
  await b.done;
  await c.running;
  assert.equal(runner.stats().queueDepth, 1);
  assert.equal(c.lease().overShare, false);
  c.release();
  await c.done;
  assert.deepEqual([a1.lease().overShare, a2.lease().overShare], [false, false], "A alone again");
  a1.release();
  await a3.running;
  a2.release();
  a3.release();
  await Promise.all([a1.done, a2.done, a3.done]);
  // Batch work stands over its share while interactive work runs.
  const batch = hold("d", "batch");
  await batch.running;
  assert.equal(batch.lease().overShare, false, "batch alone");
  const e = hold("e");
  await e.running;
  assert.deepEqual([batch.lease().overShare, e.lease().overShare], [true, false], "batch beside interactive work");
  e.release();
  await e.done;
  assert.equal(batch.lease().overShare, false, "batch alone again");
  batch.release();
  await batch.done;
  assert.equal(runner.stats().active, 0);
});
