import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import sharp from "sharp";
import Anthropic from "@anthropic-ai/sdk";
import { anthropicClient } from "../harness/anthropic-client.ts";
import { startServer, modelsDir, type TestServer } from "../harness/server.ts";
import { startCanned, type Peer } from "../harness/peers.ts";
import { llamaServerBinary } from "../harness/llama-server.ts";

/*
 * /v1/messages on the engines other than llama (test/messages.test.ts): images on the ONNX vision engine, a
 * managed llama-server, and an `upstream` engine, to which the message goes as the upstream's OpenAI chat by the
 * chat path.
 */

let srv: TestServer;
let canned: Peer;
let client: Anthropic;

before(async () => {
  canned = await startCanned();
  srv = await startServer({
    models: [
      { id: "llava-tiny", engine: "onnx", source: path.join(modelsDir, "forged/llava-tiny"), capabilities: ["chat", "vision"], threads: 1 },
      { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 128, threads: 1, load: "lazy" },
      { id: "remote", engine: "upstream", capabilities: ["chat"], upstreams: [{ url: `http://127.0.0.1:${canned.port}/v1`, model: "canned" }] },
      { id: "managed", engine: "llama-server", binary: llamaServerBinary(), source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, parallel: 1, threads: 1 },
    ],
  });
  client = anthropicClient(srv, (await srv.createKey()).key);
});

after(async () => {
  await srv?.close();
  canned?.child.kill();
});

async function png(rgb: readonly [number, number, number]): Promise<string> {
  const bytes = await sharp({ create: { width: 32, height: 32, channels: 3, background: { r: rgb[0], g: rgb[1], b: rgb[2] } } })
    .png()
    .toBuffer();
  return bytes.toString("base64");
}

test("issue 44.1 image blocks (base64 and data-URL sources) reach the vision model; on a text-only model they are a 400 naming the block", async () => {
  const red = await png([220, 20, 30]);
  const blue = await png([30, 40, 230]);
  const ask = (image: Anthropic.ImageBlockParam): Anthropic.MessageParam[] => [{ role: "user", content: [image, { type: "text", text: "What colour is this image?" }] }];
  const base64 = await client.messages.create({ model: "llava-tiny", max_tokens: 5, messages: ask({ type: "image", source: { type: "base64", media_type: "image/png", data: red } }) });
  assert.deepEqual(base64.content, [{ type: "text", text: "red" }]);
  const url = await client.messages.create({ model: "llava-tiny", max_tokens: 5, messages: ask({ type: "image", source: { type: "url", url: `data:image/png;base64,${blue}` } }) });
  assert.deepEqual(url.content, [{ type: "text", text: "blue" }]);

  const refused = await client.messages.create({ model: "stories", max_tokens: 5, messages: ask({ type: "image", source: { type: "base64", media_type: "image/png", data: red } }) }).catch((err: unknown) => err);
  assert.ok(refused instanceof Anthropic.BadRequestError, String(refused));
  assert.equal((refused.error as { error: { type: string } }).error.type, "invalid_request_error");
  assert.match(refused.message, /messages\[0\]\.content\[0\]/);
});

test("issue 44.1 engine upstream: a message, streamed and not, goes to the upstream as OpenAI chat and comes back as Anthropic's", async () => {
  const message = await client.messages.create({ model: "remote", max_tokens: 100, system: [{ type: "text", text: "Tell stories." }], messages: [{ role: "user", content: "Once" }] });
  assert.equal(message.model, "remote");
  assert.deepEqual(message.content, [{ type: "text", text: "Once upon a time there was a little girl who loved to play in the park with her dog" }]);
  assert.equal(message.stop_reason, "end_turn");
  assert.deepEqual(message.usage, { input_tokens: 8, output_tokens: 19, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 });

  const stream = client.messages.stream({ model: "remote", max_tokens: 100, messages: [{ role: "user", content: "Once" }] });
  let text = "";
  stream.on("text", (piece) => (text += piece));
  const final = await stream.finalMessage();
  assert.equal(text, "Once upon a time there was a little girl who loved to play in the park with her dog");
  assert.deepEqual(final.content, message.content);
  assert.equal(final.usage.output_tokens, 19);
});

test("issue 44.1 engine llama-server: a message, streamed and not, its count, and the window cap", async () => {
  const body = { model: "managed", max_tokens: 32_000, temperature: 0, stop_sequences: ["zzz"], messages: [{ role: "user" as const, content: "Once upon a time" }] };
  const message = await client.messages.create(body);
  assert.equal(message.model, "managed");
  assert.ok(message.content[0]!.type === "text" && message.content[0]!.text.length > 0);
  const prompt = message.usage.input_tokens + message.usage.cache_read_input_tokens!;
  assert.ok(prompt + message.usage.output_tokens <= 256, JSON.stringify(message.usage));
  const { input_tokens } = await client.messages.countTokens({ model: "managed", messages: body.messages });
  assert.equal(input_tokens, prompt);
  const final = await client.messages.stream({ ...body, max_tokens: 10 }).finalMessage();
  assert.equal(final.stop_reason, "max_tokens");
  assert.equal(final.usage.output_tokens, 10);
});
