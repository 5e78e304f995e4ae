import { test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { CallBounds } from "../src/engines/upstream/call-bounds.ts";
import { upstreamDetail, UpstreamUnavailable } from "../src/engines/upstream/upstream-errors.ts";

/** The detail of the 503 that aborted `bounds`, or null while it has not aborted. */
function cut(bounds: CallBounds): string | null {
  if (!bounds.signal.aborted) return null;
  assert.ok(bounds.signal.reason instanceof UpstreamUnavailable, String(bounds.signal.reason));
  return upstreamDetail(bounds.signal.reason);
}

test("the first event must come within firstMs; after it, each within idleMs of the one before, on one timer", async () => {
  const bounds = new CallBounds(new AbortController().signal, 10_000, { firstMs: 400, idleMs: 200 });
  await sleep(250);
  assert.equal(cut(bounds), null, "250 ms of prefill is within firstMs, though past idleMs");
  bounds.beat();
  // Past the 400 ms the first bound gave: each beat moved the one deadline on.
  for (let i = 0; i < 6; i++) {
    await sleep(30);
    assert.equal(cut(bounds), null, "a beat every 30 ms keeps a 200 ms idle bound");
    bounds.beat();
  }
  await sleep(400);
  assert.equal(cut(bounds), "the stream stalled: nothing for 200 ms");

  const silent = new CallBounds(new AbortController().signal, 10_000, { firstMs: 50, idleMs: 1000 });
  await sleep(120);
  assert.equal(cut(silent), "no first token within 50 ms");
});

test("the total bound cuts a call that keeps beating, and the caller's abort passes its own reason through", async () => {
  const busy = new CallBounds(new AbortController().signal, 100, { firstMs: 1000, idleMs: 1000 });
  const beating = setInterval(() => busy.beat(), 10);
  await sleep(180);
  clearInterval(beating);
  assert.equal(cut(busy), "total timeout");

  const caller = new AbortController();
  const followed = new CallBounds(caller.signal, 10_000);
  const reason = new Error("client gone");
  caller.abort(reason);
  assert.equal(followed.signal.reason, reason);
  assert.equal(new CallBounds(caller.signal, 10_000).signal.reason, reason, "a caller already aborted");
});

test("disposed bounds abort for nothing: not the caller, not a bound that runs out later", async () => {
  const caller = new AbortController();
  const bounds = new CallBounds(caller.signal, 30, { firstMs: 20, idleMs: 20 });
  bounds.dispose();
  caller.abort(new Error("later"));
  await sleep(60);
  assert.equal(bounds.signal.aborted, false);
});

test("a bound past what one timer can hold (2^31 - 1 ms) waits, instead of a timer Node fires at once", async () => {
  const overflows: string[] = [];
  const onWarning = (warning: Error) => warning.name === "TimeoutOverflowWarning" && overflows.push(warning.message);
  process.on("warning", onWarning);
  const bounds = new CallBounds(new AbortController().signal, 1000 * 3_600_000, { firstMs: 1000 * 3_600_000, idleMs: 60_000 });
  await sleep(30);
  process.off("warning", onWarning);
  assert.equal(bounds.signal.aborted, false);
  assert.deepEqual(overflows, []);
  bounds.dispose();
});
