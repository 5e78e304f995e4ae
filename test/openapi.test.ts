// Issue 14.1: every response has a schema, and /v1/openapi.json is a complete OpenAPI 3.1 document.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { validate } from "@readme/openapi-parser";
import openapiTS, { astToString } from "openapi-typescript";
import { modelsDir, repoRoot, startServer, type TestServer } from "../harness/server.ts";
import { readSse } from "./helpers/sse.ts";

let srv: TestServer;
let key: string;
let doc: Record<string, any>;

before(async () => {
  srv = await startServer({
    adminToken: "iHNhIT9Id8lsCqDGhHLxpiPGNl7Sm8YzAz5UJoe9vUc",
    models: [{ id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 512, parallel: 1, threads: 1 }],
  });
  key = (await srv.createKey()).key;
  const res = await srv.get("/v1/openapi.json", { key });
  assert.equal(res.status, 200);
  doc = (await res.json()) as Record<string, any>;
});

after(async () => {
  await srv?.close();
});

test("issue 14 /v1/openapi.json is a valid OpenAPI 3.1 document (@readme/openapi-parser)", async () => {
  assert.equal(doc.openapi, "3.1.0");
  const result = await validate(structuredClone(doc) as never);
  assert.equal(result.valid, true, JSON.stringify((result as { errors?: unknown }).errors));
});

test("issue 14 every operation has an operationId, tags, a 2xx body, the error envelope component, and the admin API its own tag", () => {
  const operations = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([url, methods]) =>
    Object.entries(methods).map(([method, op]) => ({ url, method, op })),
  );
  assert.ok(operations.length >= 20, `${operations.length} operations`);
  const ids = new Set<string>();
  for (const { url, method, op } of operations) {
    const where = `${method.toUpperCase()} ${url}`;
    assert.ok(op.operationId, `${where} has an operationId`);
    assert.ok(!ids.has(op.operationId), `${where}: operationId ${op.operationId} is unique`);
    ids.add(op.operationId);
    assert.ok(op.tags?.length > 0, `${where} has tags`);
    const ok = op.responses["200"] ?? op.responses["201"];
    assert.ok(ok?.content && Object.keys(ok.content).length > 0, `${where} documents its success body`);
    if (url.startsWith("/v1/") || url.startsWith("/admin/")) {
      // Issue 44.1: Anthropic's Messages API answers its errors in Anthropic's envelope.
      const envelope = url.startsWith("/v1/messages") ? "AnthropicErrorEnvelope" : "ErrorEnvelope";
      assert.deepEqual(op.responses["401"]?.content["application/json"].schema, { $ref: `#/components/schemas/${envelope}` }, `${where} 401`);
    }
    if (url.startsWith("/admin/")) assert.deepEqual(op.tags, ["admin"], `${where} is under the admin tag`);
  }
  const chat = doc.paths["/v1/chat/completions"].post;
  assert.deepEqual(chat.responses["200"].content["text/event-stream"].schema, { $ref: "#/components/schemas/ChatCompletionChunk" });
  assert.deepEqual(chat.responses["200"].content["application/json"].schema, { $ref: "#/components/schemas/ChatCompletion" });
  assert.ok(doc.paths["/v1/audio/transcriptions"].post.responses["200"].content["text/plain"], "transcription text is text/plain");
  assert.ok(doc.paths["/v1/audio/transcriptions"].post.requestBody.content["multipart/form-data"].schema.properties.file);
  for (const name of ["ChatCompletion", "ChatCompletionChunk", "EmbeddingList", "TranscriptionJson", "TranscriptionVerbose", "RerankResponse", "ModelList", "ErrorEnvelope", "AdminModelList"]) {
    assert.ok(doc.components.schemas[name], `components.schemas.${name}`);
  }
  assert.deepEqual(doc.paths["/v1/embeddings"].post.security, [{ apiKey: [] }, { xApiKey: [] }]);
  // Issue 44: legacy completions (JSON or a stream of the same object) and vLLM's tokenize and detokenize.
  const completions = doc.paths["/v1/completions"].post;
  assert.deepEqual(completions.requestBody.content["application/json"].schema, { $ref: "#/components/schemas/CreateCompletionRequest" });
  for (const type of ["application/json", "text/event-stream"]) assert.deepEqual(completions.responses["200"].content[type].schema, { $ref: "#/components/schemas/Completion" });
  assert.deepEqual(doc.paths["/v1/tokenize"].post.responses["200"].content["application/json"].schema, { $ref: "#/components/schemas/TokenCount" });
  assert.deepEqual(doc.paths["/v1/detokenize"].post.requestBody.content["application/json"].schema, { $ref: "#/components/schemas/DetokenizeRequest" });
  assert.ok(doc.components.schemas.Completion.properties.choices.items.properties.logprobs, "the legacy logprobs are documented");
  assert.ok(doc.components.schemas.TokenizeRequest.properties.prompt && doc.components.schemas.TokenizeRequest.properties.messages);
  // Issue 44.1: Anthropic's Messages API (a message or a stream of named events) and its token count.
  const messages = doc.paths["/v1/messages"].post;
  assert.deepEqual(messages.requestBody.content["application/json"].schema, { $ref: "#/components/schemas/MessagesRequest" });
  assert.deepEqual(messages.responses["200"].content["application/json"].schema, { $ref: "#/components/schemas/Message" });
  assert.deepEqual(messages.responses["200"].content["text/event-stream"].schema, { $ref: "#/components/schemas/MessageStreamEvent" });
  assert.deepEqual(messages.responses["529"].content["application/json"].schema, { $ref: "#/components/schemas/AnthropicErrorEnvelope" });
  assert.deepEqual(doc.paths["/v1/messages/count_tokens"].post.responses["200"].content["application/json"].schema, { $ref: "#/components/schemas/CountTokensResponse" });
  assert.deepEqual(messages.security, [{ apiKey: [] }, { xApiKey: [] }]);
  for (const status of ["200", "401", "529"]) assert.ok(messages.responses[status].headers["anthropic-ratelimit-requests-remaining"] && messages.responses[status].headers["retry-after"], `${status} documents Anthropic's headers`);
  // A console session stands in for the admin token; a change with it also needs the session's CSRF token.
  assert.deepEqual(doc.paths["/admin/v1/keys"].post.security, [{ adminToken: [] }, { consoleCookie: [], csrfToken: [] }]);
  assert.deepEqual(doc.paths["/admin/v1/audit"].get.security, [{ adminToken: [] }, { consoleCookie: [] }]);
  assert.deepEqual(doc.components.securitySchemes.consoleCookie, { type: "apiKey", in: "cookie", name: "__Host-modelgate_console", description: "A console session (POST /console/api/login, an invite, or OpenID Connect): a member is confined to their account and role" });
  assert.ok(doc.paths["/admin/v1/keys/{id}/revoke"].post.parameters.some((p: { in: string; name: string }) => p.in === "header" && p.name === "x-on-behalf-of"));
  assert.deepEqual(doc.paths["/console/api/login"].post.security, []);
});

test("issue 14 types generated from the served document (openapi-typescript) compile against real responses; a wrong field does not", async () => {
  const body = { model: "stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 6, temperature: 0 };
  const completion = await (await srv.post("/v1/chat/completions", body, { key })).json();
  const stream = await srv.post("/v1/chat/completions", { ...body, stream: true, stream_options: { include_usage: true } }, { key });
  const chunks = (await readSse(stream)).events;

  const dir = mkdtempSync(path.join(tmpdir(), "modelgate-openapi-ts-"));
  try {
    writeFileSync(path.join(dir, "openapi.ts"), astToString(await openapiTS(doc as never)));
    const program = (extra: string) => `import type { components } from "./openapi.ts";
type Completion = components["schemas"]["ChatCompletion"];
type Chunk = components["schemas"]["ChatCompletionChunk"];
export const completion: Completion = ${JSON.stringify(completion)};
export const chunks: Chunk[] = ${JSON.stringify(chunks)};
${extra}
`;
    const tsc = (file: string) =>
      promisify(execFile)(process.execPath, [path.join(repoRoot, "node_modules/typescript/bin/tsc"), "--noEmit", "--strict", "--allowImportingTsExtensions", "--target", "es2022", "--module", "nodenext", file], { cwd: dir }).then(
        () => ({ code: 0, out: "" }),
        (err: { code: number; stdout: string }) => ({ code: err.code, out: err.stdout }),
      );
    writeFileSync(path.join(dir, "good.ts"), program(""));
    const good = await tsc("good.ts");
    assert.equal(good.code, 0, good.out);

    const wrong = `export const wrong: Completion = { ...completion, choices: [{ index: 0, message: { role: "assistant", content: "x", toolCalls: [] }, logprobs: null, finish_reason: "stop" }] };
export const wrongChunk: Chunk = { ...chunks[0], choices: [{ index: 0, delta: {}, finish_reason: "done" }] };`;
    writeFileSync(path.join(dir, "bad.ts"), program(wrong));
    const bad = await tsc("bad.ts");
    assert.notEqual(bad.code, 0);
    assert.match(bad.out, /toolCalls/);
    assert.match(bad.out, /"done"/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
