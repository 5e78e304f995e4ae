import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { startServer, modelsDir, type TestServer } from "../harness/server.ts";

let srv: TestServer;
let key: string;

before(async () => {
  srv = await startServer({
    models: [
      { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat", "embeddings"], contextSize: 256, parallel: 1, threads: 1, load: "lazy" },
    ],
  });
  key = (await srv.createKey()).key;
});
after(() => srv?.close());

async function post(route: string, body: unknown): Promise<{ status: number; error: { type: string; code: string; param: string | null; message: string } }> {
  const res = await srv.post(`/v1${route}`, body, { key });
  const json = (await res.json()) as { error: { type: string; code: string; param: string | null; message: string } };
  return { status: res.status, error: json.error };
}

const chat = (extra: Record<string, unknown>) => ({ model: "stories", messages: [{ role: "user", content: "hi" }], ...extra });

const cases: [name: string, route: string, body: unknown, param: string][] = [
  ["§4.2 temperature 2.5 is out of range", "/chat/completions", chat({ temperature: 2.5 }), "temperature"],
  ["§4.2 temperature of the wrong type", "/chat/completions", chat({ temperature: "hot" }), "temperature"],
  ["§4.2 more than 4 stop sequences", "/chat/completions", chat({ stop: ["a", "b", "c", "d", "e"] }), "stop"],
  ["§4.2 messages is required", "/chat/completions", { model: "stories" }, "messages"],
  ["§4.2 model is required", "/chat/completions", { messages: [{ role: "user", content: "hi" }] }, "model"],
  ["decisions.md n other than 1", "/chat/completions", chat({ n: 2 }), "n"],
  ["decisions.md frequency_penalty other than 0", "/chat/completions", chat({ frequency_penalty: 0.5 }), "frequency_penalty"],
  ["decisions.md logit_bias", "/chat/completions", chat({ logit_bias: { "1": 5 } }), "logit_bias"],
  ["§2.2 an unknown role", "/chat/completions", chat({ messages: [{ role: "robot", content: "x" }] }), "messages[0].role"],
  [
    "§2.2 nested paths name the part",
    "/chat/completions",
    chat({ messages: [{ role: "user", content: [{ type: "text", text: "hi" }, { type: "image_url", image_url: { url: 42 } }] }] }),
    "messages[0].content[1].image_url.url",
  ],
  ["§4.3 dimensions is not supported", "/embeddings", { model: "stories", input: "hi", dimensions: 8 }, "dimensions"],
  ["§4.3 input of the wrong type", "/embeddings", { model: "stories", input: 42 }, "input"],
  ["§4.3 encoding_format must be float or base64", "/embeddings", { model: "stories", input: "x", encoding_format: "int8" }, "encoding_format"],
  ["§4.5 documents is required", "/rerank", { model: "stories", query: "q" }, "documents"],
  ["§4.5 top_n below 1", "/rerank", { model: "stories", query: "q", documents: ["a"], top_n: 0 }, "top_n"],
];

for (const [name, route, body, param] of cases) {
  test(`${name}: 400 invalid_parameter, param ${param}`, async () => {
    const { status, error } = await post(route, body);
    assert.equal(status, 400, JSON.stringify(error));
    assert.equal(error.type, "invalid_request_error");
    assert.equal(error.code, "invalid_parameter");
    assert.equal(error.param, param);
  });
}

test("decisions.md metadata-only parameters (user, metadata, store) are ignored, not rejected", async () => {
  const { status, error } = await post("/chat/completions", chat({ user: "u1", metadata: { a: "b" }, store: false, model: "no-such-model" }));
  // The request got past validation to the model lookup.
  assert.equal(status, 404, JSON.stringify(error));
  assert.equal(error.code, "model_not_found");
});
