import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import path from "node:path";
import { debianJemalloc, imageMallocConf } from "../harness/allocator.ts";

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
