// test: alone (a generation goes on alone within 1 s while the other stops asking)
import { test } from "node:test";
import assert from "node:assert/strict";
import type { LlamaContextSequence } from "node-llama-cpp";
import { Lockstep } from "../src/engines/llama/lockstep.ts";

/**
 * The llama engine's lockstep gate, on stand-in token iterators (the sequence's `evaluateWithMetadata`): requests
 * for the next token are let through together once every open generation has asked, so node-llama-cpp decodes
 * them in one batch. The engine-level proof (tokens per llama_decode with real streams) is in stream-chat.test.ts.
 */

/** A sequence whose token iterator records when each token was requested (the moment its decode is queued). */
function standIn(log: string[], name: string): LlamaContextSequence {
  const sequence = {
    evaluateWithMetadata() {
      let n = 0;
      return (async function* () {
        for (;;) {
          log.push(`${name}${n}`);
          await new Promise((r) => setTimeout(r, 2));
          yield { token: n++ };
        }
      })();
    },
  };
  return sequence as unknown as LlamaContextSequence;
}

/** A lockstep gate with one stand-in sequence attached per name (ids in order), and the log they share. */
function gated(...names: string[]): { log: string[]; gate: Lockstep; sequences: LlamaContextSequence[] } {
  const log: string[] = [];
  const gate = new Lockstep();
  const sequences = names.map((name, id) => {
    const sequence = standIn(log, name);
    gate.attach(sequence, id);
    return sequence;
  });
  return { log, gate, sequences };
}

const tick = () => new Promise((r) => setImmediate(r));

test("a single generation never waits for the gate", async () => {
  const { log, gate, sequences: [sequence] } = gated("a");
  const it = sequence.evaluateWithMetadata([], {});
  const pending = it.next();
  await Promise.resolve();
  assert.deepEqual(log, ["a0"], "the request reached the sequence in the same turn");
  await pending;
  await it.return(undefined);
  assert.equal(gate.stats.generations, 0);
});

test("the next tokens of all open generations are requested together, after the last one asked", async () => {
  const { log, gate, sequences } = gated("a", "b", "c", "d");
  const iterators = sequences.map((s) => s.evaluateWithMetadata([], {}));
  // Each consumer asks for its next token as soon as it has the previous one, at different moments.
  await Promise.all(
    iterators.map(async (it, i) => {
      for (let step = 0; step < 5; step++) {
        await it.next();
        for (let k = 0; k < i; k++) await Promise.resolve();
      }
    }),
  );
  for (const it of iterators) await it.return(undefined);
  // Steps 1..4 are requested as one group each: no sequence's request runs ahead into the middle of a step.
  const steps = log.slice(4).map((entry) => Number(entry.slice(1)));
  for (let i = 0; i < steps.length; i += 4) assert.deepEqual(steps.slice(i, i + 4), [1, 1, 1, 1].map((v) => v + i / 4), log.join(" "));
  assert.equal(gate.stats.generations, 0);
  assert.ok(gate.stats.tokens / gate.stats.steps >= 3.5, `${gate.stats.tokens} tokens in ${gate.stats.steps} steps`);
});

test("a generation that stops asking holds the others back one event-loop turn at most", async () => {
  const { log, gate, sequences: [a, b] } = gated("a", "b");
  const itA = a.evaluateWithMetadata([], {});
  const itB = b.evaluateWithMetadata([], {});
  await Promise.all([itA.next(), itB.next()]);
  // b keeps its iterator open but does something else for a while; a goes on alone.
  const started = performance.now();
  for (let i = 0; i < 5; i++) await itA.next();
  assert.ok(performance.now() - started < 1000);
  assert.deepEqual(log.filter((e) => e.startsWith("b")), ["b0"]);
  await tick();
  // When b comes back it joins a's steps again.
  await Promise.all([itA.next(), itB.next()]);
  await itA.return(undefined);
  await itB.return(undefined);
  assert.equal(gate.stats.generations, 0);
});

test("a generation closed while its request waits ends that request and frees its place", async () => {
  const { log, gate, sequences: [a, b] } = gated("a", "b");
  const itA = a.evaluateWithMetadata([], {});
  const firstA = itA.next(); // alone: in flight at once
  await tick(); // past the turn in which later requests would join a's step
  const itB = b.evaluateWithMetadata([], {});
  const waitingB = itB.next(); // waits for a's token
  await itB.return(undefined);
  assert.deepEqual(await waitingB, { done: true, value: undefined });
  await firstA;
  assert.equal(gate.stats.generations, 1);
  await itA.next(); // alone now: not held back
  await itA.return(undefined);
  assert.equal(gate.stats.generations, 0);
});

test("fair share: while a generation within its share is open, those over their share are held; they go on when it ends, or after a short bound while it asks nothing", async () => {
  const { log, gate, sequences: [a, b] } = gated("a", "b");
  gate.assign(0, { overShare: true, favoured: false });
  gate.assign(1, { overShare: false, favoured: true });
  const itA = a.evaluateWithMetadata([], {});
  const itB = b.evaluateWithMetadata([], {});
  await itA.next(); // alone: straight through
  const heldA = itA.next();
  for (let i = 0; i < 5; i++) await itB.next();
  assert.deepEqual(log, ["a0", "b0", "b1", "b2", "b3", "b4"], "a's next step waited for all of b's");
  // b stays open but asks for nothing: a's step goes after the bound (2 ms), not never.
  const started = performance.now();
  await heldA;
  assert.ok(performance.now() - started < 1000);
  assert.equal(log.at(-1), "a1");
  // b asks again, and a is held again; b ends, and a goes on.
  const nextA = itA.next();
  await itB.next();
  assert.deepEqual(log.slice(-2), ["a1", "b5"]);
  await itB.return(undefined);
  await nextA;
  assert.equal(log.at(-1), "a2");
  // Once the standing is gone (the request ended), nothing is held.
  gate.assign(0, null);
  gate.assign(1, null);
  await itA.return(undefined);
  assert.equal(gate.stats.generations, 0);
});

test("fair share: a favoured generation that opens while a step is being released decodes its first step alone; the held steps go after it", async () => {
  const { log, gate, sequences: [a1, a2, b] } = gated("a", "c", "b");
  gate.assign(0, { overShare: true, favoured: false });
  gate.assign(1, { overShare: true, favoured: false });
  const itA1 = a1.evaluateWithMetadata([], {});
  const itA2 = a2.evaluateWithMetadata([], {});
  const stepsA = [itA1.next(), itA2.next()]; // both asked: their step is released at the next turn
  // In the same turn, a generation within its share opens and asks for its first token (its prompt).
  gate.assign(2, { overShare: false, favoured: true });
  const itB = b.evaluateWithMetadata([], {});
  const firstB = itB.next();
  await tick();
  assert.deepEqual(log, ["b0"], "only b's step went to the engine");
  await firstB;
  await itB.return(undefined);
  await Promise.all(stepsA);
  assert.deepEqual(log, ["b0", "a0", "c0"], "the held steps went on together once b ended");
  await itA1.return(undefined);
  await itA2.return(undefined);
  assert.equal(gate.stats.generations, 0);
});

test("node-llama-cpp's decode schedule: a lone step's decode goes at once, a shared step's waits the turn", async () => {
  const { gate, sequences: [a, b] } = gated("a", "b");
  const dispatched: string[] = [];
  const itA = a.evaluateWithMetadata([], {});
  const firstA = itA.next(); // alone: passed on, in flight
  gate.schedule(() => dispatched.push("lone"));
  assert.deepEqual(dispatched, ["lone"], "the lone step's decode was dispatched in the call");
  await firstA;
  const itB = b.evaluateWithMetadata([], {});
  const steps = [itA.next(), itB.next()];
  await tick(); // the step is released together
  gate.schedule(() => dispatched.push("shared"));
  assert.deepEqual(dispatched, ["lone"], "with two generations open, the decode waits for the others' requests");
  await tick();
  assert.deepEqual(dispatched, ["lone", "shared"]);
  await Promise.all(steps);
  await itA.return(undefined);
  await itB.return(undefined);
});
