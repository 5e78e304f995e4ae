import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { buildConfig, ConfigError } from "../src/config/load-config.ts";
import { builtInEngines } from "../src/engines/registry.ts";
import { llamaCppSource, llamaServerHome } from "../src/engines/llama-server/llama-server-build.ts";
import { modelsDir, runCli, spawnServer, tempDir, trustingFetch, writeConfig } from "../harness/server.ts";
import { llamaServerBinary } from "../harness/llama-server.ts";

/**
 * Issue 35: `engine: llama` with parallel > 1 runs on the managed llama-server when one is built
 * (`llama.server: auto | never | always`), and `modelgate engines build llama-server` builds it into the data dir.
 */
const stories = path.join(modelsDir, "stories260K.gguf");
const adminToken = "Vq3oJm0dQ1yLk8ZtR7hWc2sXbN5uE9gA4fPiT6jKlMo";
const chatModel = (id: string, parallel: number, capabilities = ["chat"]) => ({ id, engine: "llama", source: stories, capabilities, contextSize: 256, parallel, threads: 1 });

/** A data dir holding a finished build: the cached binary's folder linked where a build puts it, and its build-info. */
function dataDirWithBuild(): string {
  const dataDir = path.join(tempDir("llama-server-built-"), "data");
  const home = llamaServerHome(dataDir);
  mkdirSync(path.join(home, "build"), { recursive: true });
  symlinkSync(path.dirname(llamaServerBinary()), path.join(home, "build", "bin"));
  writeFileSync(path.join(home, "build-info.json"), JSON.stringify({ commit: llamaCppSource().commit, nodeLlamaCpp: "test", builtAt: new Date().toISOString() }));
  return dataDir;
}

const place = (raw: Record<string, unknown>, dataDir = tempDir("llama-place-")) => buildConfig({ dataDir, ...raw }, null, builtInEngines());

test("llama.server: auto without a build and never keep llama in-process; always without one is a config error naming the build command", () => {
  assert.equal(place({ models: [chatModel("a", 4)] }).models[0].engine, "llama", "auto, nothing built");
  const built = dataDirWithBuild();
  assert.equal(place({ models: [chatModel("a", 4)] }, built).models[0].engine, "llama-server", "auto, built");
  assert.equal(place({ models: [chatModel("a", 4)] }, built).models[0].configuredEngine, "llama");
  assert.equal(place({ llama: { server: "never" }, models: [chatModel("a", 4)] }, built).models[0].engine, "llama", "never");
  assert.equal(place({ models: [chatModel("a", 1)] }, built).models[0].engine, "llama", "auto, parallel 1: in-process");
  assert.equal(place({ models: [chatModel("a", 4, ["chat", "embeddings"])] }, built).models[0].engine, "llama", "auto: chat + embeddings is more than one llama-server does");
  assert.equal(place({ llama: { server: "always" }, models: [chatModel("a", 1)] }, built).models[0].engine, "llama-server", "always, parallel 1");
  assert.throws(() => place({ llama: { server: "always" }, models: [chatModel("a", 4)] }), (err: Error) => {
    assert.ok(err instanceof ConfigError);
    assert.match(err.message, /models\[0\] "a": llama\.server is "always", but no llama-server is built .*modelgate engines build llama-server/);
    return true;
  });
  assert.throws(() => place({ llama: { server: "always" }, models: [chatModel("a", 4, ["chat", "embeddings"])] }, built), /cannot serve "embeddings"/);
  assert.throws(() => place({ llama: { serverBinary: "/nonexistent/llama-server" }, models: [chatModel("a", 2)] }), /llama\.serverBinary \/nonexistent\/llama-server is not an executable file/);
  assert.throws(() => place({ llama: { server: "sometimes" } }), /invalid value at llama\.server/);
  const explicit = place({ llama: { serverBinary: llamaServerBinary() }, models: [chatModel("a", 2)] }).models[0];
  assert.deepEqual([explicit.engine, (explicit.options as { binary: string }).binary], ["llama-server", llamaServerBinary()]);
});

test("modelgate engines build llama-server: a clear error without cmake or a compiler, and nothing rebuilt when built", async () => {
  const empty = tempDir("no-tools-");
  const missing = await runCli(["engines", "build", "llama-server", "--data-dir", path.join(empty, "data")], { PATH: empty });
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /building llama-server needs git, cmake, a C\+\+ compiler \(g\+\+ or clang\+\+\), make \(or ninja\), not found on the PATH; install them/);
  const json = await runCli(["engines", "build", "llama-server", "--json", "--data-dir", path.join(empty, "data")], { PATH: empty });
  assert.equal(JSON.parse(json.stdout).error.code, "missing_tools");

  const built = dataDirWithBuild();
  const again = await runCli(["engines", "build", "llama-server", "--json", "--data-dir", built], { PATH: empty });
  assert.equal(again.code, 0, again.stderr);
  const result = JSON.parse(again.stdout) as { binary: string; built: boolean; commit: string };
  assert.deepEqual([result.built, result.commit, result.binary], [false, llamaCppSource().commit, path.join(llamaServerHome(built), "build/bin/llama-server")]);
  const status = await runCli(["engines", "status", "--data-dir", built]);
  assert.match(status.stdout, /llama-server: built, llama\.cpp [0-9a-f]{12}: .*build\/bin\/llama-server\nllama\.server: auto/);
  const none = await runCli(["engines", "status", "--data-dir", path.join(empty, "data")]);
  assert.match(none.stdout, /llama-server: not built \(modelgate engines build llama-server\)/);
  const wrong = await runCli(["engines", "build", "vllm", "--data-dir", path.join(empty, "data")]);
  assert.equal(wrong.code, 1);
  assert.match(wrong.stderr, /the engine to build is llama-server/);
});

test("llama.server auto: an engine: llama model with parallel 2 is served by the built llama-server, says so at start, and answers", async () => {
  const dataDir = dataDirWithBuild();
  const dir = path.dirname(dataDir);
  const server = await spawnServer({ dataDir, adminToken, logLevel: "info", models: [chatModel("stories", 2), chatModel("inproc", 1)] }, dir);
  try {
    const { fetch, agent } = trustingFetch(readFileSync(path.join(dataDir, "tls/cert.pem"), "utf8"));
    const admin = (await (await fetch(`${server.origin}/admin/v1/models`, { headers: { authorization: `Bearer ${adminToken}` } })).json()) as { data: { id: string; engine: string; state: string }[] };
    assert.deepEqual(admin.data.map((m) => [m.id, m.engine, m.state]), [["stories", "llama-server", "ready"], ["inproc", "llama", "ready"]]);
    assert.match(server.stderr.join(""), /model stories: engine llama with parallel 2 runs on the managed llama-server/);
    assert.equal(server.stderr.join("").match(/runs on the managed llama-server/g)?.length, 1, "said once");
    assert.match(server.stdout.join(""), /model stories: ready \(engine llama, served by llama-server\)\nmodel inproc: ready\n/);

    const keyOut = writeConfig(dir, { dataDir, adminToken, models: [] }, "cli.yaml");
    await runCli(["accounts", "create", "acme", "--config", keyOut]);
    const key = (JSON.parse((await runCli(["keys", "create", "--account", "acme", "--json", "--config", keyOut])).stdout) as { key: string }).key;
    const chat = async () => {
      const res = await fetch(`${server.origin}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 10, temperature: 0 }),
      });
      assert.equal(res.status, 200);
      return (await res.json()) as { object: string; model: string; choices: { message: { content: string }; finish_reason: string }[]; usage: { completion_tokens: number; prompt_tokens: number } };
    };
    const [a, b] = await Promise.all([chat(), chat()]);
    for (const body of [a, b]) {
      assert.equal(body.object, "chat.completion");
      assert.equal(body.model, "stories");
      assert.ok(body.choices[0].message.content.length > 0);
      assert.equal(body.usage.completion_tokens, 10);
      assert.ok(body.usage.prompt_tokens > 0);
    }
    assert.equal(a.choices[0].message.content, b.choices[0].message.content, "greedy, the same prompt: the same story on both slots");
    await agent.close();
  } finally {
    await server.stop();
  }
});
