import test from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { mmapThresholdTunable, tunedEnv } from "../src/cli/malloc-tunables.ts";
import { spawnServer, tempDir } from "../harness/server.ts";

const tunable = `${mmapThresholdTunable}=1048576`;
const fixture = path.join(import.meta.dirname, "fixtures/malloc/retention.mjs");

test("issue 47 serve's environment gets a fixed mmap threshold; an operator's own threshold and other tunables are kept", () => {
  assert.equal(tunedEnv({ PATH: "/bin" }, true)?.GLIBC_TUNABLES, tunable);
  assert.equal(tunedEnv({ PATH: "/bin" }, true)?.PATH, "/bin");
  assert.equal(tunedEnv({ GLIBC_TUNABLES: "glibc.malloc.arena_max=2" }, true)?.GLIBC_TUNABLES, `glibc.malloc.arena_max=2:${tunable}`);
  assert.equal(tunedEnv({ GLIBC_TUNABLES: `glibc.malloc.arena_max=2:${mmapThresholdTunable}=65536` }, true), null);
  assert.equal(tunedEnv({}, false), null, "musl, macOS and Windows run as they are");
});

test("issue 47 under glibc's dynamic mmap threshold freed 2 MiB blocks stay resident; under the fixed one they go back", () => {
  const run = (env: NodeJS.ProcessEnv) => {
    const { GLIBC_TUNABLES: _, ...rest } = process.env;
    const out = execFileSync(process.execPath, ["--expose-gc", fixture], { env: { ...rest, ...env }, encoding: "utf8" });
    return JSON.parse(out) as { before: number; peak: number; after: number };
  };
  const dynamic = run({});
  const fixed = run({ GLIBC_TUNABLES: tunable });
  for (const r of [dynamic, fixed]) assert.ok(r.peak - r.before > 70, `80 MiB were touched: ${JSON.stringify(r)}`);
  assert.ok(dynamic.after - dynamic.before > 60, `the dynamic threshold keeps them: ${JSON.stringify(dynamic)}`);
  assert.ok(fixed.after - fixed.before < 10, `the fixed threshold returns them: ${JSON.stringify(fixed)}`);
});

test("issue 47 serve re-executes itself once with the tunable and keeps its PID", async () => {
  const dir = tempDir();
  const server = await spawnServer({ dataDir: path.join(dir, "data"), models: [] }, dir);
  try {
    const environ = readFileSync(`/proc/${server.child.pid}/environ`, "utf8").split("\0");
    assert.ok(environ.includes(`GLIBC_TUNABLES=${tunable}`), "the listening process is the spawned PID, with the tunable");
  } finally {
    await server.stop();
  }
});
