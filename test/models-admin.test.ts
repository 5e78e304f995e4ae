import { test, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { APIError } from "openai";
import { modelsDir, runCli, startServer, tempDir, type TestServer } from "../harness/server.ts";
import { startFakeHub } from "../harness/fake-hub.ts";
import { waitFor } from "./helpers/wait-for.ts";
import { EngineRegistry } from "../src/engines/registry.ts";
import { llamaKind } from "../src/engines/llama/llama.kind.ts";
import type { ModelEntry } from "../src/config/app-config.ts";

const adminToken = "KSjGOX2xh2g0bnYyOYdoqDIh-F4wRvlm-P3jLX3Cpdk";
const stories = readFileSync(path.join(modelsDir, "stories260K.gguf"));
const hub = await startFakeHub({
  "karpathy/tinyllamas": { "stories260K.gguf": stories },
  "test-org/stories-GGUF": { "stories-q4_k_m.gguf": stories, "stories-q8_0.gguf": stories },
});
after(() => hub.close());

const storiesModel = (extra: Record<string, unknown> = {}) => ({
  id: "stories",
  engine: "llama",
  source: "hf:karpathy/tinyllamas:stories260K.gguf",
  capabilities: ["chat"],
  contextSize: 1024,
  threads: 1,
  parallel: 2,
  ...extra,
});

interface AdminModel {
  id: string;
  state: string;
  active: number;
  sizeBytes: number | null;
  pullCommand: string | null;
}

function admin(server: TestServer) {
  const call = async (method: string, url: string, token: string | null = adminToken) => {
    const res = await server.fetch(`${server.origin}${url}`, { method, headers: token ? { authorization: `Bearer ${token}` } : {} });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  return {
    call,
    model: async (id: string) => (await call("GET", `/admin/v1/models/${encodeURIComponent(id)}`)).body as unknown as AdminModel,
  };
}

test("issue 9.3 a configured model whose files are missing is 404 model_not_found saying to run `modelgate pull`; once pulled and loaded it serves", async () => {
  const dataDir = tempDir();
  const server = await startServer({ adminToken, models: [storiesModel()] }, { dataDir });
  try {
    const { key } = await server.createKey();
    const client = server.openai(key);
    const err = await client.chat.completions.create({ model: "stories", messages: [{ role: "user", content: "Once upon a time" }] }).catch((e) => e);
    assert.ok(err instanceof APIError, String(err));
    assert.equal(err.status, 404);
    assert.equal(err.code, "model_not_found");
    assert.equal(err.param, "model");
    assert.match(err.message, /files are missing .*Run `modelgate pull hf:karpathy\/tinyllamas:stories260K\.gguf`/);

    const api = admin(server);
    const listed = await api.call("GET", "/admin/v1/models");
    assert.equal(listed.status, 200);
    assert.deepEqual((listed.body.data as AdminModel[]).map((m) => [m.id, m.state, m.pullCommand]), [
      ["stories", "missing", "modelgate pull hf:karpathy/tinyllamas:stories260K.gguf"],
    ]);
    const early = await api.call("POST", "/admin/v1/models/stories/load");
    assert.equal(early.status, 404);
    assert.match(String((early.body.error as { message: string }).message), /modelgate pull/);

    const pulled = await runCli(["pull", "hf:karpathy/tinyllamas:stories260K.gguf", "--data-dir", dataDir], { HF_ENDPOINT: hub.endpoint });
    assert.equal(pulled.code, 0, pulled.stderr);

    const loaded = await api.call("POST", "/admin/v1/models/stories/load?wait=true");
    assert.equal(loaded.status, 200);
    assert.equal(loaded.body.state, "ready");
    assert.equal(loaded.body.sizeBytes, stories.length);

    const completion = await client.chat.completions.create({ model: "stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 16 });
    assert.equal(completion.model, "stories");
    assert.ok(completion.choices[0].message.content!.length > 0);
    assert.ok(completion.usage!.completion_tokens > 0);
  } finally {
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test("issue 9.3 a model pulled while the server runs is picked up by the next request: 503 model_loading while it really loads, then served", async () => {
  const dataDir = tempDir();
  const server = await startServer({ models: [storiesModel({ source: "hf:test-org/stories-GGUF:Q4_K_M" })] }, { dataDir });
  try {
    const { key } = await server.createKey();
    const ask = () =>
      server.post("/v1/chat/completions", { model: "stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 8 }, { key: key });
    const missing = await ask();
    assert.equal(missing.status, 404);
    assert.match(((await missing.json()) as { error: { message: string } }).error.message, /modelgate pull hf:test-org\/stories-GGUF:Q4_K_M/);

    // The hub names the file stories-q4_k_m.gguf, not the guessed stories-Q4_K_M.gguf: the catalog finds it.
    const byRef = await runCli(["pull", "hf:test-org/stories-GGUF:Q4_K_M", "--data-dir", dataDir], { HF_ENDPOINT: hub.endpoint });
    assert.equal(byRef.code, 0, byRef.stderr);

    const loading = await ask();
    assert.equal(loading.status, 503);
    assert.ok(Number(loading.headers.get("retry-after")) >= 1);
    assert.equal(((await loading.json()) as { error: { code: string } }).error.code, "model_loading");
    const served = await waitFor(async () => (await ask()).status, (status) => status === 200, "served");
    assert.equal(served, 200);
  } finally {
    await server.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test("issue 9.4 admin load goes through `loading` (requests get 503 model_loading with Retry-After) to `ready`", async () => {
  let openGate!: () => void;
  const gate = new Promise<void>((resolve) => (openGate = resolve));
  // The real llama engine, registered as its own kind; its load only starts once the test lets it, so the loading
  // window can be observed.
  const engines = new EngineRegistry([
    {
      ...llamaKind,
      create: async (entry: ModelEntry, log) => {
        await gate;
        return llamaKind.create(entry, log);
      },
    },
  ]);
  const server = await startServer(
    { adminToken, models: [storiesModel({ source: path.join(modelsDir, "stories260K.gguf"), load: "lazy" })] },
    { engines },
  );
  try {
    const { key } = await server.createKey();
    const api = admin(server);
    assert.equal((await api.model("stories")).state, "unloaded");

    const started = await api.call("POST", "/admin/v1/models/stories/load");
    assert.equal(started.status, 202);
    assert.equal(started.body.state, "loading");

    const res = await server.post("/v1/chat/completions", { model: "stories", messages: [{ role: "user", content: "Hi" }], max_tokens: 4 }, { key: key });
    assert.equal(res.status, 503);
    assert.ok(Number(res.headers.get("retry-after")) >= 1);
    assert.ok(Number(res.headers.get("retry-after-ms")) >= 1000);
    const body = (await res.json()) as { error: { code: string; type: string } };
    assert.equal(body.error.code, "model_loading");
    assert.equal(body.error.type, "server_error");

    openGate();
    await waitFor(() => api.model("stories"), (m) => m.state === "ready", "ready");
    const ok = await server.openai(key).chat.completions.create({ model: "stories", messages: [{ role: "user", content: "Hi" }], max_tokens: 4 });
    assert.ok(ok.choices[0].message.content !== undefined);
    const again = await api.call("POST", "/admin/v1/models/stories/load");
    assert.equal(again.status, 200, "already ready");
  } finally {
    openGate();
    await server.close();
  }
});

test("issue 9.4 admin unload waits for in-flight requests; the next request reloads the model (503 model_loading, then ready)", async () => {
  const server = await startServer({ adminToken, models: [storiesModel({ source: path.join(modelsDir, "stories260K.gguf"), contextSize: 2048 })] });
  try {
    const { key } = await server.createKey();
    const api = admin(server);
    assert.equal((await api.model("stories")).state, "ready");

    const stream = await server.openai(key).chat.completions.create({
      model: "stories",
      messages: [{ role: "user", content: "Once upon a time" }],
      max_tokens: 1500,
      stream: true,
    });
    const iterator = stream[Symbol.asyncIterator]();
    await iterator.next();
    assert.equal((await api.model("stories")).active, 1);

    let unloadedAt = 0;
    const unloading = api.call("POST", "/admin/v1/models/stories/unload").then((r) => {
      unloadedAt = Date.now();
      return r;
    });
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(unloadedAt, 0, "unload waits while a request is in flight");
    let chunks = 1;
    let finish: string | null = null;
    for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
      chunks++;
      finish = next.value.choices[0]?.finish_reason ?? finish;
    }
    const streamEndedAt = Date.now();
    assert.ok(finish === "length" || finish === "stop", `the stream completed (${finish}, ${chunks} chunks)`);
    const unloaded = await unloading;
    assert.equal(unloaded.status, 200);
    assert.equal(unloaded.body.state, "unloaded");
    assert.ok(unloadedAt >= streamEndedAt - 50, "unload finished after the in-flight stream");

    // A request now starts a real load: 503 model_loading while it is under way, then it serves.
    const res = await server.post("/v1/chat/completions", { model: "stories", messages: [{ role: "user", content: "Hi" }], max_tokens: 4 }, { key: key });
    assert.equal(res.status, 503);
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, "model_loading");
    await waitFor(() => api.model("stories"), (m) => m.state === "ready", "ready again");
  } finally {
    await server.close();
  }
});

test("issue 9.4 the admin model API needs the admin token; unknown ids are 404 model_not_found", async () => {
  const server = await startServer({ adminToken, models: [storiesModel({ source: path.join(modelsDir, "stories260K.gguf"), load: "lazy" })] });
  try {
    const api = admin(server);
    const { key } = await server.createKey();
    for (const token of [null, "wrong-token-0123456789", key]) {
      const res = await api.call("POST", "/admin/v1/models/stories/load", token);
      assert.equal(res.status, 401);
      assert.equal((res.body.error as { code: string }).code, "invalid_api_key");
    }
    assert.equal((await api.model("stories")).state, "unloaded", "nothing was loaded by the refused calls");
    const unknown = await api.call("POST", "/admin/v1/models/nope/unload");
    assert.equal(unknown.status, 404);
    assert.equal((unknown.body.error as { code: string; param: string }).code, "model_not_found");
  } finally {
    await server.close();
  }
});
