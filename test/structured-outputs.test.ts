import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import OpenAI from "openai";
import { zodResponseFormat } from "openai/helpers/zod";
import { z } from "zod";
import { Ajv } from "ajv";
import { generateObject } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { startServer, modelsDir, type TestServer } from "../harness/server.ts";
import { errorOf } from "./helpers/errors.ts";

let srv: TestServer;
let key: string;
let client: OpenAI;

before(async () => {
  srv = await startServer({
    models: [
      { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat", "json"], contextSize: 1024, parallel: 2, threads: 1 },
      { id: "plain", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 512, parallel: 1, threads: 1 },
    ],
  });
  key = (await srv.createKey()).key;
  client = srv.openai(key);
});

after(async () => {
  await srv?.close();
});

/** Bounded so that a random model always fits it in max_tokens: enums, short strings, short arrays. */
const petSchema = {
  type: "object",
  properties: {
    name: { type: "string", minLength: 1, maxLength: 12 },
    kind: { type: "string", enum: ["cat", "dog", "bird"] },
    age: { type: "integer" },
    owner: {
      type: "object",
      properties: { city: { type: "string", maxLength: 10 }, verified: { type: "boolean" } },
      required: ["city", "verified"],
      additionalProperties: false,
    },
    tags: { type: "array", items: { type: "string", enum: ["small", "loud", "old"] }, maxItems: 3 },
  },
  required: ["name", "kind", "age", "owner", "tags"],
  additionalProperties: false,
} as const;

const messages = [{ role: "user" as const, content: "Describe a pet as JSON." }];

test("json_schema: over 20 runs at temperature 1, every stopped output validates (ajv) and at least 18 stop", async () => {
  const validate = new Ajv({ strict: true }).compile(petSchema);
  const finishes: string[] = [];
  for (let seed = 1; seed <= 20; seed++) {
    const res = await client.chat.completions.create({
      model: "stories",
      messages,
      temperature: 1,
      seed,
      max_tokens: 200,
      response_format: { type: "json_schema", json_schema: { name: "pet", schema: petSchema, strict: true } },
    });
    const choice = res.choices[0]!;
    finishes.push(choice.finish_reason);
    if (choice.finish_reason !== "stop") continue;
    const value: unknown = JSON.parse(choice.message.content ?? "");
    assert.ok(validate(value), `seed ${seed}: ${choice.message.content} — ${JSON.stringify(validate.errors)}`);
  }
  const stopped = finishes.filter((f) => f === "stop").length;
  assert.ok(stopped >= 18, `${stopped} of 20 stopped: ${finishes.join(",")}`);
});

test("json_schema: openai chat.completions.parse() with a zod schema returns the parsed object", async () => {
  const Pet = z.object({ name: z.string().max(10), kind: z.enum(["cat", "dog"]), legs: z.array(z.enum(["left", "right"])).max(2) });
  const res = await client.chat.completions.parse({ model: "stories", messages, temperature: 0.8, seed: 3, max_tokens: 120, response_format: zodResponseFormat(Pet, "pet") });
  const message = res.choices[0]!.message;
  assert.equal(res.choices[0]!.finish_reason, "stop");
  assert.ok(message.parsed, `parsed: ${message.content}`);
  assert.deepEqual(Pet.parse(message.parsed), message.parsed);
});

test("json_schema: the AI SDK's generateObject through @ai-sdk/openai-compatible", async () => {
  const provider = createOpenAICompatible({ name: "modelgate", baseURL: srv.baseURL, apiKey: key, fetch: srv.fetch as typeof fetch, supportsStructuredOutputs: true });
  const schema = z.object({ colour: z.enum(["red", "green", "blue"]), count: z.number().int(), label: z.string().max(8) });
  const { object, finishReason } = await generateObject({ model: provider("stories"), schema, prompt: "Pick a colour.", temperature: 0.5, seed: 7, maxOutputTokens: 120, maxRetries: 0 });
  assert.equal(finishReason, "stop");
  assert.deepEqual(schema.parse(object), object);
});

test("json_schema: max_tokens that cuts the object gives finish_reason length", async () => {
  const res = await client.chat.completions.create({
    model: "stories",
    messages,
    seed: 1,
    max_tokens: 3,
    response_format: { type: "json_schema", json_schema: { name: "pet", schema: petSchema } },
  });
  assert.equal(res.choices[0]!.finish_reason, "length");
});

async function expectError(response: Promise<Response>, expected: Record<string, unknown>): Promise<void> {
  const got = await errorOf(await response);
  for (const [field, value] of Object.entries(expected)) assert.equal(got[field as keyof typeof got], value, `${field}: ${JSON.stringify(got)}`);
}

test("json_schema: a keyword the grammar cannot enforce is a 400 naming its path; so is a missing json_schema", async () => {
  const withPattern = { type: "object", properties: { code: { type: "string", pattern: "^[A-Z]{3}$" } } };
  await expectError(
    srv.post("/v1/chat/completions", { model: "stories", messages, response_format: { type: "json_schema", json_schema: { name: "x", schema: withPattern } } }, { key }),
    { status: 400, type: "invalid_request_error", code: "invalid_parameter", param: "response_format.json_schema.schema.properties.code.pattern" },
  );
  await expectError(srv.post("/v1/chat/completions", { model: "stories", messages, response_format: { type: "json_schema" } }, { key }), {
    status: 400,
    code: "invalid_parameter",
    param: "response_format.json_schema",
  });
  await expectError(srv.post("/v1/chat/completions", { model: "stories", messages, response_format: { type: "json_schema", json_schema: { name: "bad name!", schema: {} } } }, { key }), {
    status: 400,
    code: "invalid_parameter",
    param: "response_format.json_schema.name",
  });
});

test("json_schema: a model without the json capability refuses it with a 400 naming response_format", async () => {
  await expectError(
    srv.post("/v1/chat/completions", { model: "plain", messages, response_format: { type: "json_schema", json_schema: { name: "pet", schema: petSchema } } }, { key }),
    { status: 400, code: "invalid_parameter", param: "response_format" },
  );
});
