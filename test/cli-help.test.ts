// test: long (27 s alone, 23 s of it CPU)
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { loadConfig } from "../src/config/load-config.ts";
import { builtInEngines } from "../src/engines/registry.ts";
import { repoRoot, runCli, spawnServer, tempDir, writeConfig } from "../harness/server.ts";

/** Issue 22: a CLI that explains itself, settings from the environment, and a first start that says what to do. */
const version = (JSON.parse(readFileSync(path.join(repoRoot, "package.json"), "utf8")) as { version: string }).version;

test("modelgate --version, help, and <command> [<subcommand>] --help with options and an example", async () => {
  assert.deepEqual(await runCli(["--version"]).then((r) => [r.code, r.stdout.trim()]), [0, `modelgate ${version}`]);
  assert.deepEqual(JSON.parse((await runCli(["--version", "--json"])).stdout), { version });
  const top = await runCli(["help"]);
  assert.equal(top.code, 0);
  assert.match(top.stdout, /usage: modelgate <command>/);
  for (const command of ["serve", "accounts", "keys", "usage", "audit", "migrate", "models", "pull", "engines"]) {
    for (const argv of [[command, "--help"], ["help", command]]) {
      const out = await runCli(argv);
      assert.equal(out.code, 0, `${argv.join(" ")}: ${out.stderr}`);
      assert.match(out.stdout, new RegExp(`usage: ?\\n?\\s*modelgate ${command}`), argv.join(" "));
      assert.match(out.stdout, /example:\n {2}modelgate /, `${argv.join(" ")} shows an example`);
    }
  }
  const sub = await runCli(["keys", "create", "--help"]);
  assert.equal(sub.code, 0);
  assert.match(sub.stdout, /modelgate keys create --account/);
  const unknown = await runCli(["keys", "list", "--bogus", "--data-dir", tempDir()]);
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /unknown option --bogus/);
});

test("settings from the environment: flags > MODELGATE_* > file > defaults", () => {
  const dir = tempDir("env-precedence-");
  const file = writeConfig(dir, { server: { port: 9001, host: "127.0.0.1" }, dataDir: "./file-data", logLevel: "warn", deployment: "from-file" });
  const env = { MODELGATE_PORT: "9002", MODELGATE_DATA_DIR: "/tmp/env-data", MODELGATE_DEPLOYMENT: "from-env", MODELGATE_TRUST_PROXY: "10.0.0.0/8, 192.168.0.0/16", MODELGATE_ADMIN_TOKEN: "QvCC5-qAbswRU24eJpoOpMWWZJG4YYaGG8zuI2tkMSY" };
  const fromEnv = loadConfig(file, builtInEngines(), {}, env);
  assert.equal(fromEnv.server.port, 9002, "env over file");
  assert.equal(fromEnv.server.host, "127.0.0.1", "file over default");
  assert.equal(fromEnv.logLevel, "warn");
  assert.equal(fromEnv.dataDir, "/tmp/env-data");
  assert.equal(fromEnv.deployment, "from-env");
  assert.deepEqual(fromEnv.server.trustProxy, ["10.0.0.0/8", "192.168.0.0/16"]);
  assert.equal(fromEnv.adminToken, env.MODELGATE_ADMIN_TOKEN);
  const withFlags = loadConfig(file, builtInEngines(), { dataDir: "/tmp/flag-data", port: 9003 }, env);
  assert.equal(withFlags.dataDir, "/tmp/flag-data", "flag over env");
  assert.equal(withFlags.server.port, 9003);
  const defaults = loadConfig(null, builtInEngines(), {}, {});
  assert.equal(defaults.server.port, 8443);
  assert.throws(() => loadConfig(file, builtInEngines(), {}, { MODELGATE_PORT: "http" }), /server\.port/, "a bad value names the setting");
});

test("MODELGATE_CONFIG and MODELGATE_DATA_DIR reach the CLI; --data-dir wins", async () => {
  const dir = tempDir("env-cli-");
  const file = writeConfig(dir, { models: [] });
  const viaEnv = await runCli(["models", "list", "--json"], { MODELGATE_CONFIG: file, MODELGATE_DATA_DIR: path.join(dir, "env") });
  assert.equal(viaEnv.code, 0, viaEnv.stderr);
  assert.equal(JSON.parse(viaEnv.stdout).dataDir, path.join(dir, "env"));
  assert.equal(JSON.parse(viaEnv.stdout).defaultCatalog, false, "the config named by MODELGATE_CONFIG was read");
  const viaFlag = await runCli(["models", "list", "--json", "--data-dir", path.join(dir, "flag")], { MODELGATE_CONFIG: file, MODELGATE_DATA_DIR: path.join(dir, "env") });
  assert.equal(JSON.parse(viaFlag.stdout).dataDir, path.join(dir, "flag"));
});

test("a first start on a store with no accounts prints the two commands that create the first account and key", async () => {
  const dir = tempDir("first-start-");
  const server = await spawnServer({ dataDir: dir, models: [] }, dir, [], { PATH: path.dirname(process.execPath) });
  try {
    const out = server.stdout.join("");
    assert.match(out, /no accounts yet/);
    assert.match(out, new RegExp(`npx modelgate --config \\S+ --data-dir ${dir} accounts create my-team`));
    assert.match(out, new RegExp(`npx modelgate --config \\S+ --data-dir ${dir} keys create --account my-team`));
  } finally {
    await server.stop();
  }
});

test("a missing local model file is reported with the path looked at, never with a pull command for it", async () => {
  const dir = tempDir("missing-local-");
  const raw = { dataDir: dir, models: [{ id: "gone", engine: "llama", source: "../nope/gone.gguf", capabilities: ["chat"], load: "lazy" }] };
  const file = writeConfig(dir, raw);
  const listed = await runCli(["models", "list", "--config", file]);
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, /gone\s+llama\s+missing/);
  assert.doesNotMatch(listed.stdout, /modelgate pull/);
  const server = await spawnServer(raw, dir);
  try {
    assert.match(server.stdout.join(""), new RegExp(`model gone: missing: no file at ${path.resolve(dir, "../nope/gone.gguf")}`));
    assert.doesNotMatch(server.stdout.join(""), /modelgate pull/);
  } finally {
    await server.stop();
  }
});
