// Issue 45.1: routes as the config declares them (errors at start naming the route), as keys and plans see them
// (GET /v1/models, scopes), and on every inference endpoint, on real engines.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { toFile } from "openai";
import { testConfig } from "../harness/config.ts";
import { modelsDir, runCli, startServer, tempDir, writeConfig, type TestServer } from "../harness/server.ts";
import { errorOf } from "./helpers/errors.ts";
import { usageRows } from "./helpers/usage.ts";
import { waitFor } from "./helpers/wait-for.ts";

const adminToken = "Qw8eRt5yUi2oPa7sDf4gHj1kLz9xCv6bNm3-Mq";
const stories = path.join(modelsDir, "stories260K.gguf");
const llama = (id: string, source: string, capabilities: string[], extra: Record<string, unknown> = {}) => ({ id, engine: "llama", source, capabilities, threads: 1, ...extra });
const embedGguf = path.join(modelsDir, "forged/bert-embed-tiny.gguf");
const models = [
  llama("small", stories, ["chat"], { contextSize: 512 }),
  llama("sleepy", stories, ["chat"], { contextSize: 512, load: "lazy" }),
  llama("big", stories, ["chat"], { contextSize: 1024 }),
  llama("tools", path.join(modelsDir, "forged/stories260K-chatml-tools.gguf"), ["chat", "tools"], { contextSize: 2048 }),
  llama("embed-a", embedGguf, ["embeddings"]),
  llama("embed-b", embedGguf, ["embeddings"]),
  llama("rerank-a", path.join(modelsDir, "forged/bert-rerank-tiny.gguf"), ["rerank"]),
  { id: "whisper-a", engine: "onnx", source: path.join(modelsDir, "forged/whisper-scripted"), capabilities: ["transcriptions"], threads: 1 },
];
const routes = [
  { id: "chat-default", targets: [{ model: "big", weight: 1 }, { model: "small", weight: 1 }] },
  { id: "chat-tools", targets: [{ model: "tools" }], fallbacks: ["small"] },
  { id: "vectors", targets: [{ model: "embed-a", weight: 3 }, { model: "embed-b", weight: 1 }] },
  { id: "ranker", targets: [{ model: "rerank-a" }] },
  { id: "speech", targets: [{ model: "whisper-a" }] },
  { id: "wake", targets: [{ model: "sleepy" }], fallbacks: ["small"] },
];

let srv: TestServer;

before(async () => {
  srv = await startServer({ adminToken, plans: { small: { models: ["chat-default", "small"] }, routeOnly: { models: ["chat-default"] } }, models, routes });
});

after(async () => {
  await srv?.close();
});

const configError = (raw: Record<string, unknown>): string => {
  try {
    testConfig(raw, "routes.yaml");
  } catch (err) {
    return (err as Error).message;
  }
  assert.fail("expected a config error");
};

test("issue 45.1 a route's config errors are startup errors naming the route: no shared capability, unknown or route targets, a clash with a model id", () => {
  const base = { models: models.slice(0, 5) };
  assert.match(configError({ ...base, routes: [{ id: "mixed", targets: [{ model: "small" }, { model: "embed-a" }] }] }), /routes\[0\]: the targets of route "mixed" share no capability \(small: chat; embed-a: embeddings\)/);
  assert.match(configError({ ...base, routes: [{ id: "r", targets: [{ model: "nope" }] }] }), /routes\[0\]\.targets\[0\]\.model: unknown model "nope" in route "r"/);
  assert.match(
    configError({ ...base, routes: [{ id: "a", targets: [{ model: "small" }] }, { id: "b", targets: [{ model: "small" }], fallbacks: ["a"] }] }),
    /routes\[1\]\.fallbacks\[0\]: "a" is a route; a route's targets and fallbacks are models \(routes do not name routes\)/,
  );
  assert.match(configError({ ...base, routes: [{ id: "small", targets: [{ model: "big" }] }] }), /routes\[0\]\.id: "small" is also a model id/);
  assert.match(configError({ ...base, routes: [{ id: "r", targets: [{ model: "small", weight: 0 }] }] }), /every weight of route "r" is 0/);
  assert.match(configError({ ...base, routes: [{ id: "r", targets: [{ model: "small" }, { model: "small" }] }] }), /routes\[0\]\.targets\[1\]: "small" is listed twice in route "r"/);
  assert.match(configError({ ...base, routes: [{ id: "r", targets: [{ model: "small" }], fallbackOn: { overload: false } }] }), /unknown key "overload" at routes\[0\]\.fallbackOn\.overload/);
});

test("issue 45.1 embeddings targets of different vector lengths (known once loaded): serve refuses to start, naming the route and each length", async () => {
  const dir = tempDir();
  const file = writeConfig(dir, {
    dataDir: dir,
    models: [llama("embed-64", embedGguf, ["embeddings"]), { id: "embed-128", engine: "onnx", source: path.join(modelsDir, "forged/bert-embed-tiny"), capabilities: ["embeddings"], threads: 1 }],
    routes: [{ id: "vectors", targets: [{ model: "embed-64" }], fallbacks: ["embed-128"] }],
  });
  const run = await runCli(["serve", "--config", file, "--port", "0"]);
  assert.equal(run.code, 1, run.stderr);
  assert.match(run.stderr, /route "vectors": its embeddings targets give vectors of different lengths \(embed-64: 64, embed-128: 128\)/);
  assert.doesNotMatch(run.stdout, /listening/);
});

test("issue 45.1 a route is listed in GET /v1/models like a model, and only for a key that may name one of its targets itself", async () => {
  const all = await srv.createKey();
  const ids = ((await (await srv.get("/v1/models", { key: all.key })).json()) as { data: { id: string; object: string }[] }).data.map((m) => m.id);
  for (const id of ["chat-default", "chat-tools", "vectors", "ranker", "speech"]) assert.ok(ids.includes(id), `${id} listed`);
  const one = (await (await srv.get("/v1/models/chat-default", { key: all.key })).json()) as { id: string; object: string; created: number; owned_by: string };
  assert.deepEqual(one, { id: "chat-default", object: "model", created: one.created, owned_by: "modelgate" });

  // A plan that names the route but none of its models: the route reaches nothing for it.
  const routeOnly = await srv.createKey({ plan: "routeOnly" });
  assert.deepEqual(((await (await srv.get("/v1/models", { key: routeOnly.key })).json()) as { data: unknown[] }).data, []);
  const refused = await srv.post("/v1/chat/completions", { model: "chat-default", messages: [{ role: "user", content: "Once" }], max_tokens: 2 }, { key: routeOnly.key });
  assert.deepEqual(await errorOf(refused), { status: 403, type: "permission_error", code: "model_not_in_plan", param: "model" });

  // A plan (and a key scope) naming the route and one target: every request goes to that target, whatever the split.
  for (const limited of [await srv.createKey({ plan: "small" }), await srv.createKey({ models: ["chat-default", "small"] })]) {
    const listed = ((await (await srv.get("/v1/models", { key: limited.key })).json()) as { data: { id: string }[] }).data.map((m) => m.id);
    assert.deepEqual(listed.sort(), ["chat-default", "small"]);
    for (let i = 0; i < 12; i++) {
      const res = await srv.post("/v1/chat/completions", { model: "chat-default", messages: [{ role: "user", content: `Story ${i}` }], max_tokens: 2 }, { key: limited.key });
      assert.equal(((await res.json()) as { model: string }).model, "small");
    }
  }
});

test("issue 45.1 a route serves what every target shares: tools on a route with a target without them is a 400 naming the route", async () => {
  const { key } = await srv.createKey();
  const tools = [{ type: "function", function: { name: "f", parameters: { type: "object", properties: {} } } }];
  const res = await srv.post("/v1/chat/completions", { model: "chat-tools", messages: [{ role: "user", content: "Once" }], tools, max_tokens: 4 }, { key });
  const err = await errorOf(res.clone());
  assert.deepEqual(err, { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "tools" });
  assert.match(((await res.json()) as { error: { message: string } }).error.message, /The model 'chat-tools' does not support tools/);
  const wrongEndpoint = await srv.post("/v1/embeddings", { model: "chat-default", input: "x" }, { key });
  assert.deepEqual(await errorOf(wrongEndpoint), { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "model" });
});

test("issue 45.1 every endpoint through a route: chat, /v1/responses, embeddings, rerank and transcription name the target that served and charge it", async () => {
  const { key, id, accountId } = await srv.createKey();
  const openai = srv.openai(key);
  const seen = new Set<string>();

  const chat = await openai.chat.completions.create({ model: "chat-default", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 4 });
  assert.ok(["big", "small"].includes(chat.model));
  seen.add(chat.model);
  const stream = await openai.chat.completions.create({ model: "chat-default", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 4, stream: true });
  for await (const chunk of stream) assert.equal(chunk.model, chat.model, "the same conversation, the same target");

  const response = await openai.responses.create({ model: "chat-default", input: "Once upon a time", max_output_tokens: 4 });
  assert.equal(response.model, chat.model, "the same account and opening message: the same target");

  const embedded = await srv.post("/v1/embeddings", { model: "vectors", input: ["a cat", "a dog"] }, { key });
  const vectors = (await embedded.json()) as { model: string; data: { embedding: number[] }[] };
  assert.ok(["embed-a", "embed-b"].includes(vectors.model));
  assert.equal(embedded.headers.get("x-modelgate-route"), `vectors; target=${vectors.model}; fallbacks=0`);
  assert.equal(vectors.data[0].embedding.length, 64);

  const ranked = (await (await srv.post("/v1/rerank", { model: "ranker", query: "What is the capital of France?", documents: ["Paris is the capital of France.", "The cat sat on the mat."] }, { key })).json()) as { model: string; results: { index: number }[] };
  assert.equal(ranked.model, "rerank-a");
  assert.equal(ranked.results[0].index, 0);

  const audio = await toFile(readFileSync(path.join(modelsDir, "jfk.wav")), "jfk.wav");
  const transcript = await openai.audio.transcriptions.create({ model: "speech", file: audio });
  assert.match(transcript.text, /ask not what your country can do for you/);

  const rows = await usageRows(srv.server, srv.config, accountId, id);
  assert.deepEqual(rows.map(([model, endpoint, requests]) => `${model} ${endpoint} ${requests}`).sort(), [`${chat.model} chat 3`, `${vectors.model} embeddings 1`, "rerank-a rerank 1", "whisper-a transcriptions 1"].sort());

  // The admin API: each route's split and what it served in the last minute.
  const admin = (await (await srv.get("/admin/v1/routes/chat-default", { key: adminToken })).json()) as { targets: { model: string; share: number; servedLastMinute: number }[] };
  assert.deepEqual(admin.targets.map((t) => [t.model, t.share]), [["big", 0.5], ["small", 0.5]]);
  // (other tests' requests through the route count too)
  assert.ok(admin.targets.find((t) => t.model === chat.model)!.servedLastMinute >= 3);
});

test("issue 45.1 a target not loaded yet is unavailable: its requests go to the fallback while it loads, then to it", async () => {
  const { key } = await srv.createKey();
  const ask = () => srv.post("/v1/chat/completions", { model: "wake", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 2 }, { key });
  const first = await ask();
  assert.equal(((await first.json()) as { model: string }).model, "small");
  assert.equal(first.headers.get("x-modelgate-route"), "wake; target=small; fallbacks=1");
  const admin = (await (await srv.get("/admin/v1/routes/wake", { key: adminToken })).json()) as { fallbacksLastMinute: unknown[] };
  assert.deepEqual(admin.fallbacksLastMinute, [{ from: "sleepy", reason: "unavailable", count: 1 }]);
  // The request started its load; once loaded, the target serves.
  await waitFor(() => srv.server.ctx.catalog.get("sleepy").state, (s) => s === "ready", "sleepy to load");
  const later = await ask();
  assert.equal(later.headers.get("x-modelgate-route"), "wake; target=sleepy; fallbacks=0");
});

test("issue 45.1 the Batch API: lines naming a route run on its targets, each output line naming the model that served it", async () => {
  const { key, id, accountId } = await srv.createKey();
  const client = srv.openai(key);
  const lines = [0, 1, 2, 3].map((i) => JSON.stringify({ custom_id: `c${i}`, method: "POST", url: "/v1/chat/completions", body: { model: "chat-default", messages: [{ role: "user", content: `Batch story ${i}` }], max_tokens: 2 } }));
  const file = await client.files.create({ file: await toFile(Buffer.from(`${lines.join("\n")}\n`), "input.jsonl"), purpose: "batch" });
  const created = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
  const batch = await waitFor(() => client.batches.retrieve(created.id), (b) => b.status === "completed", "the batch to complete", 60_000, 100);
  const out = (await (await client.files.content(batch.output_file_id!)).text()).trim().split("\n").map((l) => JSON.parse(l) as { response: { body: { model: string } } });
  const served = out.map((l) => l.response.body.model);
  for (const model of served) assert.ok(["big", "small"].includes(model), model);
  const rows = await usageRows(srv.server, srv.config, accountId, id);
  const byModel = Object.fromEntries(rows.map(([model, , requests]) => [model, requests]));
  assert.deepEqual(byModel, Object.fromEntries(["big", "small"].filter((m) => served.includes(m)).map((m) => [m, served.filter((s) => s === m).length])));
});

test("issue 45.1 /v1/tokenize on a route counts with the target a request would run on, and answers the route's largest window", async () => {
  const { key } = await srv.createKey();
  const res = await srv.post("/v1/tokenize", { model: "chat-default", messages: [{ role: "user", content: "Once upon a time" }] }, { key });
  const body = (await res.json()) as { model: string; count: number; max_model_len: number };
  assert.ok(["big", "small"].includes(body.model));
  assert.ok(body.count > 0);
  assert.equal(body.max_model_len, 1024);
});

// A completion's place in the split hashes its account and its prompt's first 256 characters. This account sends
// documents 0-5 below to big, big, big, small, big, big (and, were only the account hashed, all of them to small).
const documentsAccount = "acct_RoutingDocs000001";
const documentText = (d: number) =>
  `Document ${d}. Once upon a time there was a little girl named Lily. She liked to play in the park with her ball. One day she saw a big dog near the tree. The dog was sad because it had lost its bone. Lily wanted to help the dog find the bone. They looked under the bench and behind the slide. `;

test("issue 44.2 with 45.1: /v1/completions through a route names the target that served, streamed and not, and one document's completions stay on one target", async () => {
  const { key, id, accountId } = await srv.createKey({ accountId: documentsAccount });
  const served: string[] = [];
  for (let d = 0; d < 6; d++) {
    // The client completes the same document twice, the second time with more typed after its opening.
    const seen = new Set<string>();
    for (const prompt of [documentText(d), `${documentText(d)}They found it under a big`]) {
      const res = await srv.post("/v1/completions", { model: "chat-default", prompt, max_tokens: 2, temperature: 0 }, { key });
      assert.equal(res.status, 200, await res.clone().text());
      const { model } = (await res.json()) as { model: string };
      assert.equal(res.headers.get("x-modelgate-route"), `chat-default; target=${model}; fallbacks=0`);
      seen.add(model);
    }
    assert.equal(seen.size, 1, `document ${d} was completed by ${[...seen].join(" and ")}`);
    served.push(...seen);
  }
  assert.deepEqual(served, ["big", "big", "big", "small", "big", "big"], "documents spread over the targets by their opening, not by the account alone");

  const stream = await srv.openai(key).completions.create({ model: "chat-default", prompt: documentText(3), max_tokens: 2, temperature: 0, stream: true, stream_options: { include_usage: true } });
  let events = 0;
  for await (const event of stream) {
    assert.equal(event.model, "small", "every event names the target of its document");
    events++;
  }
  assert.ok(events >= 2);
  const rows = await usageRows(srv.server, srv.config, accountId, id);
  assert.deepEqual(rows.map(([model, endpoint, requests]) => `${model} ${endpoint} ${requests}`).sort(), ["big chat 10", "small chat 3"], "charged to the target that served");
});

test("issue 44.3 with 45.1: tokenize of a prompt and detokenize on a route take a key of any endpoint of its models, name the target, and reach only targets the key may name", async () => {
  const embeddingsKey = await srv.createKey({ endpoints: ["embeddings"] });
  const res = await srv.post("/v1/tokenize", { model: "vectors", prompt: "a cat" }, { key: embeddingsKey.key });
  assert.equal(res.status, 200, await res.clone().text());
  const counted = (await res.json()) as { model: string; count: number; tokens: number[] };
  assert.ok(["embed-a", "embed-b"].includes(counted.model));
  assert.equal(res.headers.get("x-modelgate-route"), `vectors; target=${counted.model}; fallbacks=0`);
  assert.equal(counted.count, counted.tokens.length);
  const back = await srv.post("/v1/detokenize", { model: "vectors", tokens: counted.tokens }, { key: embeddingsKey.key });
  assert.equal(back.status, 200);
  assert.equal(back.headers.get("x-modelgate-route"), `vectors; target=${counted.model}; fallbacks=0`, "ids go back through the tokenizer that made them");
  assert.match(((await back.json()) as { prompt: string }).prompt, /a cat/);

  // The route's models serve chat only: an embeddings key may not tokenize with them.
  const chatRoute = await srv.post("/v1/tokenize", { model: "chat-default", prompt: "a cat" }, { key: embeddingsKey.key });
  assert.deepEqual(await errorOf(chatRoute), { status: 403, type: "permission_error", code: "model_not_in_plan", param: "model" });
  // A key that may name only one target of the route tokenizes there, whatever the split.
  const oneTarget = await srv.createKey({ endpoints: ["embeddings"], models: ["vectors", "embed-b"] });
  for (const prompt of ["a cat", "a dog", "a bird", "a fish"]) {
    const one = (await (await srv.post("/v1/tokenize", { model: "vectors", prompt }, { key: oneTarget.key })).json()) as { model: string };
    assert.equal(one.model, "embed-b");
  }
});
