import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import OpenAI from "openai";
import { startServer, modelsDir, type TestServer } from "../harness/server.ts";
import { readSse } from "./helpers/sse.ts";

let srv: TestServer;
let key: string;
let client: OpenAI;

const forged = path.join(modelsDir, "forged/stories260K-chatml-tools.gguf");

before(async () => {
  srv = await startServer({
    models: [
      { id: "tools", engine: "llama", source: forged, capabilities: ["chat", "tools", "json"], contextSize: 2048, parallel: 2, threads: 1 },
      { id: "think", engine: "llama", source: forged, capabilities: ["chat", "tools", "reasoning"], contextSize: 2048, parallel: 1, threads: 1 },
      { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat", "json"], contextSize: 512, parallel: 4, threads: 1 },
      { id: "tools-capped", engine: "llama", source: forged, capabilities: ["chat", "tools"], contextSize: 2048, parallel: 1, threads: 1, limits: { maxTools: 2, maxToolSchemaNodes: 12 } },
    ],
  });
  key = (await srv.createKey()).key;
  client = srv.openai(key);
});

after(async () => {
  await srv?.close();
});

const weather = {
  type: "function" as const,
  function: {
    name: "get_weather",
    description: "Current weather for a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string", maxLength: 40 }, days: { type: "integer" }, unit: { type: "string", enum: ["c", "f"] } },
      required: ["city"],
    },
  },
};
const ask = [{ role: "user" as const, content: "What is the weather in Paris?" }];

function assertWeatherArgs(json: string): void {
  const args = JSON.parse(json) as Record<string, unknown>;
  assert.equal(typeof args.city, "string");
  assert.ok((args.city as string).length <= 40);
  assert.ok(Number.isInteger(args.days), `days is an integer: ${json}`);
  assert.ok(args.unit === "c" || args.unit === "f");
  assert.deepEqual(Object.keys(args).sort(), ["city", "days", "unit"]);
}

const post = (body: Record<string, unknown>) => srv.post("/v1/chat/completions", body, { key });

test("§4.2 rule 1 a named tool_choice forces a call whose arguments match the schema (grammar-constrained)", async () => {
  for (const seed of [1, 2, 3]) {
    const res = await client.chat.completions.create({
      model: "tools",
      messages: ask,
      tools: [weather],
      tool_choice: { type: "function", function: { name: "get_weather" } },
      temperature: 1,
      seed,
      max_tokens: 300,
    });
    const choice = res.choices[0];
    assert.equal(choice.finish_reason, "tool_calls");
    assert.equal(choice.message.content, null);
    assert.equal(choice.message.tool_calls!.length, 1);
    const call = choice.message.tool_calls![0] as { id: string; type: string; function: { name: string; arguments: string } };
    assert.match(call.id, /^call_/);
    assert.equal(call.type, "function");
    assert.equal(call.function.name, "get_weather");
    assertWeatherArgs(call.function.arguments);
    assert.ok(res.usage!.prompt_tokens > 400, "the tool definitions are in the templated prompt");
  }
});

test("§4.2 tool_choice required forces a call too; tool_choice none answers with text", async () => {
  const forced = await client.chat.completions.create({ model: "tools", messages: ask, tools: [weather], tool_choice: "required", max_tokens: 300, seed: 5 });
  assert.equal(forced.choices[0].finish_reason, "tool_calls");
  assertWeatherArgs(forced.choices[0].message.tool_calls![0].type === "function" ? (forced.choices[0].message.tool_calls![0] as { function: { arguments: string } }).function.arguments : "");
  const none = await client.chat.completions.create({ model: "tools", messages: ask, tools: [weather], tool_choice: "none", max_tokens: 20, seed: 5 });
  assert.equal(none.choices[0].message.tool_calls, undefined);
  assert.equal(typeof none.choices[0].message.content, "string");
  assert.notEqual(none.choices[0].finish_reason, "tool_calls");
});

test("§4.2 rule 1 full tool round trip: call -> tool message with tool_call_id -> answer", async () => {
  const first = await client.chat.completions.create({
    model: "tools",
    messages: ask,
    tools: [weather],
    tool_choice: { type: "function", function: { name: "get_weather" } },
    max_tokens: 300,
    seed: 1,
  });
  const call = first.choices[0].message.tool_calls![0];
  const second = await client.chat.completions.create({
    model: "tools",
    messages: [...ask, first.choices[0].message, { role: "tool", tool_call_id: call.id, content: JSON.stringify({ temperature: 21, sky: "clear" }) }],
    tools: [weather],
    max_tokens: 30,
    seed: 1,
  });
  assert.equal(second.choices[0].message.tool_calls, undefined);
  assert.ok(second.choices[0].message.content!.length > 0);
  assert.ok(["stop", "length"].includes(second.choices[0].finish_reason));
  // The call and its result are in the prompt: it is longer than the first one.
  assert.ok(second.usage!.prompt_tokens > first.usage!.prompt_tokens);
});

test("§4.2 rule 1 a tool message with an unknown tool_call_id is 400 naming it", async () => {
  const res = await post({
    model: "tools",
    messages: [
      ...ask,
      { role: "assistant", content: null, tool_calls: [{ id: "call_a", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
      { role: "tool", tool_call_id: "call_b", content: "21C" },
    ],
    tools: [weather],
  });
  assert.equal(res.status, 400);
  const body = (await res.json()) as { error: { code: string; param: string } };
  assert.equal(body.error.code, "invalid_parameter");
  assert.equal(body.error.param, "messages[2].tool_call_id");
});

test("§4.6 streamed tool-call deltas: the first carries index, id, type and name; later ones only argument fragments", async () => {
  const res = await post({ model: "tools", messages: ask, tools: [weather], tool_choice: "required", max_tokens: 300, seed: 2, stream: true });
  assert.equal(res.status, 200);
  const { events, done } = await readSse(res);
  assert.ok(done, "ends with data: [DONE]");
  const chunks = events as { choices: { delta: Record<string, any>; finish_reason: string | null }[] }[];
  assert.deepEqual(chunks[0].choices[0].delta, { role: "assistant", content: "" });
  const calls = chunks.filter((c) => c.choices[0].delta.tool_calls).map((c) => c.choices[0].delta.tool_calls[0]);
  assert.ok(calls.length >= 2);
  assert.deepEqual(Object.keys(calls[0]).sort(), ["function", "id", "index", "type"]);
  assert.equal(calls[0].index, 0);
  assert.equal(calls[0].type, "function");
  assert.equal(calls[0].function.name, "get_weather");
  for (const later of calls.slice(1)) {
    assert.deepEqual(Object.keys(later).sort(), ["function", "index"]);
    assert.deepEqual(Object.keys(later.function), ["arguments"]);
  }
  assertWeatherArgs(calls.map((c) => c.function.arguments).join(""));
  const last = chunks.at(-1)!;
  assert.deepEqual(last.choices[0].delta, {});
  assert.equal(last.choices[0].finish_reason, "tool_calls");

  // The official client assembles the same call.
  const stream = await client.chat.completions.create({ model: "tools", messages: ask, tools: [weather], tool_choice: "required", max_tokens: 300, seed: 2, stream: true });
  let args = "";
  let name = "";
  for await (const chunk of stream) {
    const delta = chunk.choices[0]?.delta.tool_calls?.[0];
    if (delta?.function?.name) name = delta.function.name;
    args += delta?.function?.arguments ?? "";
  }
  assert.equal(name, "get_weather");
  assertWeatherArgs(args);
});

test("§4.2 a tool schema the grammar cannot honour is a 400 naming the path", async () => {
  const res = await post({
    model: "tools",
    messages: ask,
    tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: { code: { type: "string", pattern: "^[A-Z]+$" } } } } }],
    tool_choice: "required",
  });
  assert.equal(res.status, 400);
  const body = (await res.json()) as { error: { code: string; param: string } };
  assert.equal(body.error.code, "invalid_parameter");
  assert.equal(body.error.param, "tools[0].function.parameters.properties.code.pattern");
});

test("issue 29.17 tools are bounded per model: their number (limits.maxTools, default 128) and their subschemas together (limits.maxToolSchemaNodes, default 4096), each a 400 naming tools", async () => {
  const fn = (name: string, properties: Record<string, unknown> = { city: { type: "string" } }) => ({ type: "function", function: { name, parameters: { type: "object", properties } } });
  const expectTools400 = async (body: Record<string, unknown>, message: RegExp) => {
    const res = await post({ messages: ask, max_tokens: 4, ...body });
    const error = (await res.json()) as { error: { code: string; param: string | null; message: string } };
    assert.equal(res.status, 400, JSON.stringify(error));
    assert.deepEqual([error.error.code, error.error.param], ["invalid_parameter", "tools"]);
    assert.match(error.error.message, message);
  };
  const many = Array.from({ length: 129 }, (_, i) => fn(`f${i}`));
  await expectTools400({ model: "tools", tools: many }, /tools has 129 items; .* at most 128/);
  await expectTools400({ model: "tools", tools: many, tool_choice: "none" }, /at most 128/);
  // 60 tools of 70 properties: 4,260 subschemas, each tool well within the per-schema bound of 2,000.
  const wide = Object.fromEntries(Array.from({ length: 70 }, (_, i) => [`p${i}`, { type: "string" }]));
  await expectTools400({ model: "tools", tools: Array.from({ length: 60 }, (_, i) => fn(`w${i}`, wide)) }, /more than 4096 subschemas/);

  await expectTools400({ model: "tools-capped", tools: [fn("a"), fn("b"), fn("c")] }, /tools has 3 items; .* at most 2/);
  // 9 subschemas (the root, where, city, zip and its 2 alternatives, when and its items, days) + weather's 4 = 13.
  const nested = { where: { type: "object", properties: { city: { type: "string" }, zip: { anyOf: [{ type: "string" }, { type: "integer" }] } } }, when: { type: "array", items: { type: "string" } }, days: { type: "integer" } };
  await expectTools400({ model: "tools-capped", tools: [fn("a", nested), weather] }, /more than 12 subschemas/);
  const within = await post({ model: "tools-capped", messages: ask, max_tokens: 4, tools: [fn("a"), weather] });
  assert.equal(within.status, 200, await within.text());
});

test("reasoning model: the thought goes to reasoning_content, not content, and counts toward max_tokens", async () => {
  const res = await client.chat.completions.create({ model: "think", messages: [{ role: "user", content: "Why is the sky blue?" }], max_tokens: 40, seed: 1 });
  const message = res.choices[0].message as { content: string | null; reasoning_content?: string };
  assert.ok(message.reasoning_content && message.reasoning_content.length > 0, "reasoning_content present");
  assert.ok(!message.reasoning_content.includes("<think>"));
  assert.ok(!(message.content ?? "").includes("<think>"));
  assert.equal(res.usage!.completion_tokens, 40);
  assert.equal(res.choices[0].finish_reason, "length");

  const stream = await post({ model: "think", messages: [{ role: "user", content: "Why is the sky blue?" }], max_tokens: 40, seed: 1, stream: true });
  const deltas = (await readSse(stream)).events.map((e) => (e as { choices: { delta: Record<string, string> }[] }).choices[0].delta);
  const streamedReasoning = deltas.map((d) => d.reasoning_content ?? "").join("");
  assert.equal(streamedReasoning, message.reasoning_content);
});

class EndOfInput extends Error {}

/** True when `text` is complete JSON, or a prefix that some continuation turns into valid JSON. */
function isJsonPrefix(text: string): boolean {
  let i = 0;
  const peek = () => {
    if (i >= text.length) throw new EndOfInput();
    return text[i];
  };
  const ws = () => {
    while (i < text.length && /\s/.test(text[i])) i++;
  };
  const expect = (c: string) => {
    if (peek() !== c) throw new Error(`expected ${c} at ${i}`);
    i++;
  };
  const literal = (word: string) => {
    for (const c of word) expect(c);
  };
  const string = () => {
    expect('"');
    for (;;) {
      const c = peek();
      i++;
      if (c === '"') return;
      if (c === "\\") {
        const e = peek();
        i++;
        if (e === "u") for (let k = 0; k < 4; k++) if (!/[0-9a-fA-F]/.test(peek())) throw new Error("bad escape");
        else i++;
        else if (!'"\\/bfnrt'.includes(e)) throw new Error("bad escape");
      } else if (c < " ") throw new Error("control character in string");
    }
  };
  const value = (): void => {
    ws();
    const c = peek();
    if (c === "{" || c === "[") {
      const close = c === "{" ? "}" : "]";
      i++;
      ws();
      if (peek() === close) return void i++;
      for (;;) {
        if (close === "}") {
          ws();
          string();
          ws();
          expect(":");
        }
        value();
        ws();
        const d = peek();
        i++;
        if (d === close) return;
        if (d !== ",") throw new Error(`unexpected ${d}`);
      }
    }
    if (c === '"') return string();
    if (c === "t") return literal("true");
    if (c === "f") return literal("false");
    if (c === "n") return literal("null");
    if (!/[-0-9]/.test(c)) throw new Error(`unexpected ${c}`);
    while (i < text.length && /[-+0-9.eE]/.test(text[i])) i++;
  };
  try {
    value();
    ws();
    return i === text.length;
  } catch (err) {
    return err instanceof EndOfInput;
  }
}

test("JSON mode: 20 runs at temperature 1.5 all parse unless cut by length, and cut ones are valid JSON prefixes", async () => {
  assert.ok(isJsonPrefix('{"a": [1, "b'), "self-check: prefix");
  assert.ok(!isJsonPrefix('{"a" 1'), "self-check: invalid");
  const messages = [{ role: "user" as const, content: "Answer in JSON: the name and age of the girl." }];
  const runs = await Promise.all(
    Array.from({ length: 20 }, (_, seed) =>
      client.chat.completions.create({ model: "stories", messages, response_format: { type: "json_object" }, temperature: 1.5, max_tokens: 80, seed }),
    ),
  );
  for (const run of runs) {
    const text = run.choices[0].message.content!;
    if (run.choices[0].finish_reason === "length") assert.ok(isJsonPrefix(text), `valid JSON prefix: ${text}`);
    else JSON.parse(text);
  }
  // Without the grammar the same model writes story prose, which is not JSON.
  const free = await client.chat.completions.create({ model: "stories", messages, temperature: 1.5, max_tokens: 80, seed: 0 });
  assert.ok(!isJsonPrefix(free.choices[0].message.content!));
});

test("§4.2 rule 6 response_format json_object on a model without JSON support is 400", async () => {
  const res = await post({ model: "think", messages: ask, response_format: { type: "json_object" } });
  assert.equal(res.status, 400);
  assert.equal(((await res.json()) as { error: { param: string } }).error.param, "response_format");
});
