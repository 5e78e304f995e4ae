import { test } from "node:test";
import assert from "node:assert/strict";
import { AsyncQueue } from "../src/workers/async-queue.ts";

test("a queue that wakes its consumer on the next turn: the producer's own microtasks run first, nothing is lost or reordered", async () => {
  const queue = new AsyncQueue<number>({ wakeNextTurn: true });
  const log: string[] = [];
  const consumed = (async () => {
    for await (const n of queue) log.push(`took ${n}`);
    log.push("ended");
  })();
  await new Promise((r) => setImmediate(r)); // the consumer is waiting
  queue.push(1);
  for (let i = 0; i < 5; i++) await Promise.resolve(); // the producer goes on with work of its own
  log.push("producer's work");
  queue.push(2);
  queue.push(3);
  queue.end();
  await consumed;
  assert.deepEqual(log, ["producer's work", "took 1", "took 2", "took 3", "ended"]);
});

test("the default queue wakes its consumer at once, and a failure reaches it after the items before it", async () => {
  const queue = new AsyncQueue<number>();
  const log: string[] = [];
  const consumed = (async () => {
    for await (const n of queue) log.push(`took ${n}`);
  })();
  await new Promise((r) => setImmediate(r));
  queue.push(1);
  for (let i = 0; i < 5; i++) await Promise.resolve();
  log.push("producer's work");
  queue.push(2);
  queue.end(new Error("engine failed"));
  await assert.rejects(consumed, /engine failed/);
  assert.deepEqual(log, ["took 1", "producer's work", "took 2"]);
});
