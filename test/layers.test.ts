// Issues 14.5 and 30: the layer rules are a check with teeth (dependency-cruiser, .dependency-cruiser.cjs): an
// allow-list per folder of src/, no import cycle between files or folders, and test/, bench/, harness/ and console/
// kept apart. Each rule has a failing fixture under test/fixtures/layers/.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { cruise, type IReporterOutput } from "dependency-cruiser";
import { repoRoot } from "../harness/server.ts";

const ruleSet = createRequire(import.meta.url)(path.join(repoRoot, ".dependency-cruiser.cjs")) as { forbidden: { name: string }[]; options: Record<string, unknown> };

interface Violation {
  rule: { name: string };
  from: string;
  to: string;
}

const cruised = ["src", "test", "bench", "harness", "console"];

function describe(v: Violation): string {
  return `${v.rule.name}: ${v.from} -> ${v.to}`;
}

async function check(root: string): Promise<{ violations: string[]; sources: string[] }> {
  const dirs = cruised.filter((dir) => existsSync(path.join(root, dir)));
  const options = { ...ruleSet.options, validate: true, ruleSet: { forbidden: ruleSet.forbidden }, baseDir: root };
  const result = (await cruise(dirs, options as never)) as IReporterOutput;
  const output = result.output as { modules: { source: string }[]; summary: { violations: Violation[] } };
  return { violations: output.summary.violations.map(describe), sources: output.modules.map((m) => m.source) };
}

function sourceFiles(dir: string): number {
  return readdirSync(dir, { withFileTypes: true, recursive: true }).filter((e) => e.isFile() && /\.(ts|mjs)$/.test(e.name)).length;
}

test("issue 30 layers: src/, test/, bench/, harness/ and console/ keep every rule (allow-lists, no cycles)", async () => {
  const { violations, sources } = await check(repoRoot);
  assert.deepEqual(violations, []);
  const analysed = sources.filter((s) => s.startsWith("src/")).length;
  const files = sourceFiles(path.join(repoRoot, "src"));
  assert.ok(analysed >= files, `the check analysed ${analysed} modules of src/; src holds ${files} files`);
  for (const dir of ["test", "bench", "harness", "console"]) assert.ok(sources.some((s) => s.startsWith(`${dir}/`)), `${dir}/ is cruised`);
});

test("issue 30 layers: a violating import fails the check with its rule's name, for every rule", async () => {
  const { violations } = await check(path.join(repoRoot, "test/fixtures/layers"));
  assert.deepEqual(violations.sort(), [
    "app-context-layer: src/app-context.ts -> src/features/inference.ts",
    "audio-layer: src/audio/imports-engines.ts -> src/engines/stub.ts",
    "auth-layer: src/auth/imports-app-context.ts -> src/app-context.ts",
    "batches-layer: src/features/batches/imports-plugins.ts -> src/plugins/stub.ts",
    "bench-never-imports-test: bench/uses-test.ts -> test/helpers/helper.ts",
    "catalog-layer: src/catalog/imports-store.ts -> src/store/stub.ts",
    "config-imports-only-errors: src/config/imports-keys.ts -> src/keys/stub.ts",
    "console-is-static: console/app.js -> src/errors/stub.ts",
    "engines-layer: src/engines/imports-http.ts -> src/http/stub.ts",
    "engines-layer: src/engines/imports-store.ts -> src/store/stub.ts",
    "engines-never-import-http: src/engines/imports-http.ts -> src/http/stub.ts",
    "errors-imports-nothing: src/errors/imports-config.ts -> src/config/stub.ts",
    "every-folder-has-a-layer: src/stray/imports-cli.ts -> src/cli/stub.ts",
    "features-layer: src/features/chat/imports-plugins.ts -> src/plugins/stub.ts",
    "features-stay-apart: src/features/rerank/imports-chat-internals.ts -> src/features/chat/stub.ts",
    "generation-layer: src/features/generation/imports-chat-schema.ts -> src/features/chat/chat.schema.ts",
    "harness-imports-src-only: harness/uses-test.ts -> test/helpers/helper.ts",
    "http-layer: src/http/imports-auth.ts -> src/auth/stub.ts",
    "keys-layer: src/keys/imports-auth.ts -> src/auth/stub.ts",
    "metrics-layer: src/metrics/imports-store.ts -> src/store/stub.ts",
    "no-circular: src/engines/ping.ts -> src/engines/pong.ts",
    "no-folder-cycles: src/engines/a -> src/engines/b",
    "no-folder-cycles: src/engines/b -> src/engines/a",
    "only-cli-imports-cli: src/server.ts -> src/cli/stub.ts",
    "only-cli-imports-cli: src/stray/imports-cli.ts -> src/cli/stub.ts",
    "plugins-layer: src/plugins/imports-scopes.ts -> src/scopes/stub.ts",
    "scheduler-layer: src/scheduler/imports-catalog.ts -> src/catalog/stub.ts",
    "scopes-layer: src/scopes/imports-stray.ts -> src/stray/stub.ts",
    "server-layer: src/server.ts -> src/cli/stub.ts",
    "src-is-self-contained: src/store/imports-test.ts -> test/helpers/helper.ts",
    "store-layer: src/store/imports-keys.ts -> src/keys/stub.ts",
    "telemetry-imports-nothing: src/telemetry/imports-config.ts -> src/config/stub.ts",
    "test-never-imports-bench: test/uses-bench.ts -> bench/peers/peer.ts",
    "workers-layer: src/workers/imports-audio.ts -> src/audio/stub.ts",
  ]);
  const caught = new Set(violations.map((v) => v.slice(0, v.indexOf(":"))));
  assert.deepEqual(ruleSet.forbidden.map((r) => r.name).filter((name) => !caught.has(name)), [], "every rule has a failing fixture");
});
