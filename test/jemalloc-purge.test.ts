// test: alone (its first reading must come before jemalloc's background thread starts purging what the worker freed, and 30 MiB must go back within 30 s: both need spare CPU)
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import path from "node:path";
import { debianJemalloc, imageMallocConf, jemallocTotalsConf, parseJemallocTotals } from "../harness/allocator.ts";

/**
 * Issue 47's tenth hour: on jemalloc, the replicas' RSS moved in steps of 10–20 MB that stayed for ten minutes. Without
 * its background thread, jemalloc purges an arena's freed pages only when that arena is used again, so what an idle
 * thread freed stays resident. The container image's MALLOC_CONF (decision 0051) gives them back within the decay time.
 */

const fixture = path.join(import.meta.dirname, "fixtures/malloc/idle-thread-free.mjs");

test("issue 47 with the image's MALLOC_CONF, jemalloc returns what an idle worker thread freed", { skip: debianJemalloc ? false : "Debian's libjemalloc2 is not installed" }, () => {
  const conf = imageMallocConf();
  const r = JSON.parse(execFileSync(process.execPath, ["--expose-gc", fixture], { encoding: "utf8", env: { ...process.env, LD_PRELOAD: debianJemalloc!, MALLOC_CONF: conf } })) as { before: number; freed: number; after: number; ms: number };
  assert.ok(r.freed - r.before > 50, `the worker's 64 MiB were still resident when it freed them: ${JSON.stringify(r)}`);
  // Without the background thread, 2–7 MiB of them go back in 30 s (decision 0051); with it, 40 within about 16 s.
  assert.ok(r.freed - r.after >= 30, `MALLOC_CONF=${conf} returned them: ${JSON.stringify(r)}`);
});

test("issue 47 the soak's allocator readings: jemalloc prints its totals every interval, and they parse", { skip: debianJemalloc ? false : "Debian's libjemalloc2 is not installed" }, () => {
  // 100 MB allocated a megabyte at a time, 10 held at once: about 3 readings at an interval of 30 MB.
  const script = "const held = []; for (let i = 0; i < 100; i++) { held.push(Buffer.alloc(1e6)); if (held.length > 10) held.shift(); }";
  const { stderr } = spawnSync(process.execPath, ["-e", script], { encoding: "utf8", env: { ...process.env, LD_PRELOAD: debianJemalloc!, MALLOC_CONF: `${imageMallocConf()},${jemallocTotalsConf(30e6)}` } });
  const readings = parseJemallocTotals(stderr);
  assert.ok(readings.length >= 2, `readings: ${JSON.stringify(readings)} from ${stderr.slice(0, 500)}`);
  for (const r of readings) {
    assert.ok(r.allocated >= 10e6 && r.active >= r.allocated && r.resident >= r.active && r.mapped >= r.active, JSON.stringify(r));
    assert.ok(r.metadata > 0 && r.retained >= 0, JSON.stringify(r));
  }
});
