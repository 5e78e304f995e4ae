// test: long (24 s alone, 21 s of it CPU)
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import YAML from "yaml";
import { modelsDir, requester, runCli, spawnServer, tempDir, trustingFetch, type SpawnedServer } from "../harness/server.ts";
import { createKey } from "../harness/keys.ts";
import { sseFrames } from "./helpers/sse.ts";
import { startFakeHub } from "../harness/fake-hub.ts";
import { testConfig } from "../harness/config.ts";
import { waitFor } from "./helpers/wait-for.ts";

const adminToken = "wrrmnIYhgP9_uQcRZmVJT2tdehaKsErYUj32hL8o-Og";
const storiesPath = path.join(modelsDir, "stories260K.gguf");
const rerankPath = path.join(modelsDir, "forged/bert-rerank-tiny.gguf");
const stories = readFileSync(storiesPath);
const hub = await startFakeHub({ "karpathy/tinyllamas": { "stories260K.gguf": stories } });
after(() => hub.close());

interface AdminModel {
  id: string;
  state: string;
  parallel: number;
}

function clientFor(server: SpawnedServer, dataDir: string) {
  const { fetch } = trustingFetch(readFileSync(path.join(dataDir, "tls/cert.pem"), "utf8"));
  const models = async () => {
    const res = await fetch(`${server.origin}/admin/v1/models`, { headers: { authorization: `Bearer ${adminToken}` } });
    assert.equal(res.status, 200);
    return ((await res.json()) as { data: AdminModel[] }).data;
  };
  return { fetch, models };
}

test("issue 9.4 SIGHUP reloads the config: removed, changed and added models are applied and an in-flight stream is not dropped", async () => {
  const dir = tempDir();
  const dataDir = path.join(dir, "data");
  const raw = (models: unknown[]) => ({ adminToken, dataDir, logLevel: "warn", models });
  const a = { id: "a", engine: "llama", source: storiesPath, capabilities: ["chat"], contextSize: 2048, threads: 1, parallel: 1 };
  const b = { id: "b", engine: "llama", source: rerankPath, capabilities: ["rerank"], threads: 1, parallel: 1 };
  const server = await spawnServer(raw([a, b]), dir);
  try {
    const configFile = path.join(dir, readdirSync(dir).find((f) => f.startsWith("config-"))!);
    const { key } = await createKey(testConfig(raw([a, b]), configFile));
    const { fetch, models } = clientFor(server, dataDir);
    assert.deepEqual((await models()).map((m) => [m.id, m.state]), [["a", "ready"], ["b", "ready"]]);

    // A long stream on `a`, which the reload removes.
    const res = await requester(fetch, server.origin).post("/v1/chat/completions", { model: "a", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 2000, stream: true }, { key });
    assert.equal(res.status, 200);
    const frames = sseFrames(res);
    const seen: any[] = [(await frames.next()).value];

    const c = { ...a, id: "c" };
    writeFileSync(configFile, YAML.stringify(raw([{ ...b, parallel: 2 }, c])));
    server.child.kill("SIGHUP");
    const after = await waitFor(models, (ms) => ms.map((m) => m.id).join() === "b,c" && ms.every((m) => m.state === "ready"), "b and c ready", 60_000);
    assert.equal(after.find((m) => m.id === "b")!.parallel, 2, "b was replaced by its changed entry");
    const reloadSeenAt = Date.now();

    const gone = await requester(fetch, server.origin).post("/v1/chat/completions", { model: "a", messages: [{ role: "user", content: "Hi" }], max_tokens: 4 }, { key });
    assert.equal(gone.status, 404);
    assert.equal(((await gone.json()) as { error: { code: string } }).error.code, "model_not_found");

    for await (const frame of frames) seen.push(frame);
    // Had the stream ended before the reload, its bytes would already be buffered here and read at once.
    assert.ok(Date.now() - reloadSeenAt > 250, "the stream was still being generated after the reload applied");
    assert.match(seen.at(-2)?.choices?.[0]?.finish_reason ?? "", /^(length|stop)$/);
    assert.equal(seen.at(-1), "[DONE]", "the in-flight stream on the removed model completed");

    const ranked = await requester(fetch, server.origin).post("/v1/rerank", { model: "b", query: "What is the capital of France?", documents: ["The cat sat on the mat.", "Paris is the capital of France."] }, { key });
    assert.equal(ranked.status, 200);
    assert.equal(((await ranked.json()) as { results: { index: number }[] }).results[0].index, 1);
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("issue 47 SIGHUP applies a changed plan to a key already known (and cached): its next answers carry the new limit", async () => {
  const dir = tempDir();
  const raw = (requests: number) => ({ dataDir: path.join(dir, "data"), logLevel: "warn", models: [], plans: { metered: { rateLimit: { requests, window: "1m" } } } });
  const server = await spawnServer(raw(50), dir);
  try {
    const configFile = path.join(dir, readdirSync(dir).find((f) => f.startsWith("config-"))!);
    const { key } = await createKey(testConfig(raw(50), configFile), { plan: "metered" });
    const { fetch } = trustingFetch(readFileSync(path.join(dir, "data/tls/cert.pem"), "utf8"));
    const limit = async () => {
      const res = await requester(fetch, server.origin).get("/v1/models", { key });
      await res.arrayBuffer();
      return res.headers.get("x-ratelimit-limit-requests");
    };
    assert.equal(await limit(), "50");
    writeFileSync(configFile, YAML.stringify(raw(70)));
    server.child.kill("SIGHUP");
    // Within the key cache's 500 ms (and the reload's own time), never later.
    await waitFor(limit, (l) => l === "70", "the reloaded plan's limit", 3_000, 100);
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("issue 9.3 `serve --pull` fetches missing hub models at start with progress, then serves them", async () => {
  const dir = tempDir();
  const dataDir = path.join(dir, "data");
  const model = { id: "stories", engine: "llama", source: "hf:karpathy/tinyllamas:stories260K.gguf", capabilities: ["chat"], threads: 1 };
  const server = await spawnServer({ adminToken, dataDir, logLevel: "warn", models: [model] }, dir, ["--pull"], { HF_ENDPOINT: hub.endpoint });
  try {
    const stderr = server.stderr.join("");
    assert.match(stderr, /pulling karpathy\/tinyllamas\/stories260K\.gguf: 1\.2 MB/);
    assert.match(stderr, /pulled karpathy\/tinyllamas\/stories260K\.gguf/);
    assert.match(server.stdout.join(""), /model stories: ready/);
    const { models } = clientFor(server, dataDir);
    assert.deepEqual((await models()).map((m) => [m.id, m.state]), [["stories", "ready"]]);

    // `models list` asks the running server for load states.
    const configFile = path.join(dir, readdirSync(dir).find((f) => f.startsWith("config-"))!);
    const listed = await runCli(["models", "list", "--config", configFile, "--server", server.origin, "--json"]);
    assert.equal(listed.code, 0, listed.stderr);
    const parsed = JSON.parse(listed.stdout) as { server: string; models: { id: string; state: string; sizeBytes: number }[] };
    assert.equal(parsed.server, server.origin);
    assert.deepEqual(parsed.models.map((m) => [m.id, m.state, m.sizeBytes]), [["stories", "loaded", stories.length]]);
    const text = await runCli(["models", "list", "--config", configFile, "--server", server.origin]);
    assert.match(text.stdout, /^stories\s+llama\s+loaded\s+1\.2 MB\s+chat\s+hf:karpathy\/tinyllamas:stories260K\.gguf$/m);
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("issue 9.3 offline, `pull: auto` still starts the service; the missing model is listed and its requests get 404 naming `modelgate pull`", async () => {
  const dir = tempDir();
  const dataDir = path.join(dir, "data");
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const closedPort = (probe.address() as net.AddressInfo).port;
  await new Promise((resolve) => probe.close(resolve));
  const model = { id: "stories", engine: "llama", source: "hf:karpathy/tinyllamas:stories260K.gguf", capabilities: ["chat"], threads: 1 };
  const raw = { adminToken, dataDir, logLevel: "warn", pull: "auto", models: [model] };
  const server = await spawnServer(raw, dir, [], { HF_ENDPOINT: `http://127.0.0.1:${closedPort}` });
  try {
    // The reason is whatever the connection met: ECONNREFUSED, or a reset when another test's server took the port.
    assert.match(server.stderr.join(""), /could not pull stories \(hf:karpathy\/tinyllamas:stories260K\.gguf\): cannot reach http:\/\/127\.0\.0\.1:\d+: [A-Z_]+; it stays unavailable/);
    assert.match(server.stdout.join(""), /model stories: missing .*run: modelgate pull hf:karpathy\/tinyllamas:stories260K\.gguf/);
    const configFile = path.join(dir, readdirSync(dir).find((f) => f.startsWith("config-"))!);
    const { key } = await createKey(testConfig(raw, configFile));
    const { fetch, models } = clientFor(server, dataDir);
    assert.deepEqual((await models()).map((m) => [m.id, m.state]), [["stories", "missing"]]);
    const res = await requester(fetch, server.origin).post("/v1/chat/completions", { model: "stories", messages: [{ role: "user", content: "Hi" }] }, { key });
    assert.equal(res.status, 404);
    const error = ((await res.json()) as { error: { code: string; param: string; message: string } }).error;
    assert.equal(error.code, "model_not_found");
    assert.equal(error.param, "model");
    assert.match(error.message, /Run `modelgate pull hf:karpathy\/tinyllamas:stories260K\.gguf`/);
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
