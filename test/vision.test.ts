import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import path from "node:path";
import { after, before, test } from "node:test";
import OpenAI from "openai";
import sharp from "sharp";
import { modelsDir, startServer, type TestServer } from "../harness/server.ts";
import { apiErrorOf } from "./helpers/errors.ts";

/**
 * Vision chat through the real server and the official client, on the forged llava-tiny (it answers the
 * dominant colour of its images, `none` without one).
 */

let srv: TestServer;
let client: OpenAI;
let key: string;

const llava = path.join(modelsDir, "forged/llava-tiny");

before(async () => {
  srv = await startServer({
    plans: { small: { maxBodyBytes: 8192 } },
    models: [
      { id: "llava-tiny", engine: "onnx", source: llava, capabilities: ["chat", "vision"], threads: 1 },
      { id: "llava-small-window", engine: "onnx", source: llava, capabilities: ["chat", "vision"], threads: 1, contextSize: 16 },
      { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], threads: 1, contextSize: 128, load: "lazy" },
    ],
  });
  key = (await srv.createKey()).key;
  client = srv.openai(key);
});

after(async () => {
  await srv?.close();
});

const colours = { red: [220, 20, 30], green: [10, 200, 40], blue: [30, 40, 230] } as const;

async function image(rgb: readonly number[], format: "png" | "jpeg" = "png", size = 48): Promise<string> {
  const bytes = await sharp({ create: { width: size, height: size, channels: 3, background: { r: rgb[0], g: rgb[1], b: rgb[2] } } })
    [format]()
    .toBuffer();
  return `data:image/${format};base64,${bytes.toString("base64")}`;
}

function ask(url: string | string[], text = "What colour is this image?"): OpenAI.Chat.ChatCompletionMessageParam[] {
  const urls = Array.isArray(url) ? url : [url];
  return [{ role: "user", content: [{ type: "text", text }, ...urls.map((u) => ({ type: "image_url" as const, image_url: { url: u } }))] }];
}


test("§4.2 vision: solid red, green and blue PNGs are answered red, green, blue (non-stream)", async () => {
  for (const [name, rgb] of Object.entries(colours)) {
    const res = await client.chat.completions.create({ model: "llava-tiny", messages: ask(await image(rgb)) });
    assert.equal(res.choices[0].message.content, name);
    assert.equal(res.choices[0].finish_reason, "stop");
    assert.equal(res.model, "llava-tiny");
    // Prompt: BOS, role markup, the question, one image token; the answer is one token then </s>.
    assert.ok(res.usage!.prompt_tokens > 1, String(res.usage!.prompt_tokens));
    assert.equal(res.usage!.completion_tokens, 1);
    assert.equal(res.usage!.total_tokens, res.usage!.prompt_tokens + 1);
  }
});

test("§6 vision streams: first chunk role+empty content, the colour in content deltas, finish_reason stop, [DONE]", async () => {
  for (const [name, rgb] of Object.entries(colours)) {
    const stream = await client.chat.completions.create({
      model: "llava-tiny",
      messages: ask(await image(rgb)),
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.Chat.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    assert.deepEqual(chunks[0].choices[0].delta, { role: "assistant", content: "" });
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    assert.equal(text, name);
    const final = chunks.filter((c) => c.choices[0]?.finish_reason);
    assert.equal(final.length, 1);
    assert.equal(final[0].choices[0].finish_reason, "stop");
    assert.deepEqual(final[0].choices[0].delta, {});
    const usage = chunks.at(-1)!.usage;
    assert.equal(usage?.completion_tokens, 1);
  }
});

test("§2.2 a JPEG data URL works; several images and an image-less prompt reach the model", async () => {
  const jpeg = await client.chat.completions.create({ model: "llava-tiny", messages: ask(await image(colours.green, "jpeg")) });
  assert.equal(jpeg.choices[0].message.content, "green");
  // Two images: the mean colour decides (bright red + dark blue -> red), and both count toward the prompt.
  const one = await client.chat.completions.create({ model: "llava-tiny", messages: ask(await image([250, 0, 0])) });
  const two = await client.chat.completions.create({ model: "llava-tiny", messages: ask([await image([250, 0, 0]), await image([0, 0, 100])]) });
  assert.equal(two.choices[0].message.content, "red");
  assert.equal(two.usage!.prompt_tokens, one.usage!.prompt_tokens + 1, "each image is one token in llava-tiny");
  const none = await client.chat.completions.create({ model: "llava-tiny", messages: [{ role: "user", content: "Hello there" }] });
  assert.equal(none.choices[0].message.content, "none");
});

test("§4.2 max_tokens, stop, temperature and seed are honoured by the VLM engine", async () => {
  const red = await image(colours.red);
  const capped = await client.chat.completions.create({ model: "llava-tiny", messages: ask(red), max_tokens: 1 });
  assert.equal(capped.choices[0].message.content, "red");
  assert.equal(capped.choices[0].finish_reason, "length");
  const stopped = await client.chat.completions.create({ model: "llava-tiny", messages: ask(red), stop: ["ed"] });
  assert.equal(stopped.choices[0].message.content, "r");
  assert.equal(stopped.choices[0].finish_reason, "stop");
  const sampled = await client.chat.completions.create({ model: "llava-tiny", messages: ask(red), temperature: 1.5, seed: 42 });
  assert.equal(sampled.choices[0].message.content, "red", "the forged margins are wide enough that sampling keeps the answer");
});

test("§4.2 images count toward the context: too many for the window is 400 context_length_exceeded (param messages)", async () => {
  const blue = await image(colours.blue, "png", 8);
  const ok = await client.chat.completions.create({ model: "llava-small-window", messages: ask([blue]), max_tokens: 2 });
  assert.equal(ok.choices[0].message.content, "blue");
  const tooMany = await apiErrorOf(client.chat.completions.create({ model: "llava-small-window", messages: ask(Array(16).fill(blue)) }));
  assert.equal(tooMany.status, 400);
  assert.equal(tooMany.code, "context_length_exceeded");
  assert.equal(tooMany.param, "messages");
  assert.match(tooMany.message, /16 images/);
  const withMax = await apiErrorOf(client.chat.completions.create({ model: "llava-small-window", messages: ask([blue]), max_tokens: 14 }));
  assert.equal(withMax.code, "context_length_exceeded");
});

test("§4.2 rule 6: response_format, tools and logprobs on the VLM get a clear 400 naming the parameter", async () => {
  const messages = ask(await image(colours.red));
  const json = await apiErrorOf(client.chat.completions.create({ model: "llava-tiny", messages, response_format: { type: "json_object" } }));
  assert.equal(json.status, 400);
  assert.equal(json.code, "invalid_parameter");
  assert.equal(json.param, "response_format");
  const tools = await apiErrorOf(
    client.chat.completions.create({
      model: "llava-tiny",
      messages,
      tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: {} } } }],
    }),
  );
  assert.equal(tools.param, "tools");
  const logprobs = await apiErrorOf(client.chat.completions.create({ model: "llava-tiny", messages, logprobs: true }));
  assert.equal(logprobs.param, "logprobs");
});

test("§4.2 rule 2: an image sent to a text-only model is 400 invalid_parameter naming the image part", async () => {
  const err = await apiErrorOf(client.chat.completions.create({ model: "stories", messages: ask(await image(colours.red)) }));
  assert.equal(err.status, 400);
  assert.equal(err.code, "invalid_parameter");
  assert.equal(err.param, "messages[0].content[1]");
  assert.equal((err.error as { type?: string }).type, "invalid_request_error");
});

test("§2.2 bad images: each case is 400 invalid_parameter naming messages[0].content[1].image_url.url", async () => {
  const png = await image(colours.red);
  const jpegBytes = (await image(colours.red, "jpeg")).split(",")[1];
  const pngBytes = png.split(",")[1];
  const cases: [string, string][] = [
    ["bad base64", "data:image/png;base64,@@not*base64@@"],
    ["JPEG bytes labelled PNG", `data:image/png;base64,${jpegBytes}`],
    ["PNG bytes labelled JPEG", `data:image/jpeg;base64,${pngBytes}`],
    ["another MIME type", `data:image/gif;base64,${pngBytes}`],
    ["a non-data URL", "https://example.com/cat.png"],
    ["a PNG signature with a corrupt body", `data:image/png;base64,${Buffer.concat([Buffer.from(pngBytes, "base64").subarray(0, 16), Buffer.alloc(40, 7)]).toString("base64")}`],
  ];
  for (const [name, url] of cases) {
    const err = await apiErrorOf(client.chat.completions.create({ model: "llava-tiny", messages: ask(url) }));
    assert.equal(err.status, 400, name);
    assert.equal(err.code, "invalid_parameter", name);
    assert.equal(err.param, "messages[0].content[1].image_url.url", `${name}: ${err.message}`);
  }
});

test("§8 decoded images are bounded by the plan's body limit: a larger image is 413 request_too_large", async () => {
  const small = await srv.createKey({ plan: "small" });
  const smallClient = srv.openai(small.key);
  const noise = await sharp(randomBytes(64 * 64 * 3), { raw: { width: 64, height: 64, channels: 3 } })
    .png()
    .toBuffer();
  assert.ok(noise.length > 8192, String(noise.length));
  const err = await apiErrorOf(smallClient.chat.completions.create({ model: "llava-tiny", messages: ask(`data:image/png;base64,${noise.toString("base64")}`) }));
  assert.equal(err.status, 413);
  assert.equal(err.code, "request_too_large");
  const ok = await smallClient.chat.completions.create({ model: "llava-tiny", messages: ask(await image(colours.blue, "png", 8)) });
  assert.equal(ok.choices[0].message.content, "blue");
});

test("issue 44.3 the VLM's tokenizer: messages with an image counted as its chat counts them, text and ids both ways; a legacy completion is the capability 400", async () => {
  const messages = ask(await image(colours.red));
  const counted = (await (await srv.post("/v1/tokenize", { model: "llava-tiny", messages }, { key })).json()) as { count: number; tokens: number[]; max_model_len: number };
  const chat = await client.chat.completions.create({ model: "llava-tiny", messages });
  assert.equal(counted.count, chat.usage!.prompt_tokens);
  assert.equal(counted.tokens.length, counted.count);
  assert.equal(counted.max_model_len, 4096);
  const text = (await (await srv.post("/v1/tokenize", { model: "llava-tiny", prompt: "red green blue", add_special_tokens: false }, { key })).json()) as { tokens: number[] };
  assert.ok(text.tokens.length > 0);
  const back = (await (await srv.post("/v1/detokenize", { model: "llava-tiny", tokens: text.tokens }, { key })).json()) as { prompt: string };
  assert.equal(back.prompt.trim(), "red green blue");
  const outside = await srv.post("/v1/detokenize", { model: "llava-tiny", tokens: [10_000_000] }, { key });
  assert.equal(outside.status, 400);
  assert.equal(((await outside.json()) as { error: { param: string } }).error.param, "tokens[0]");
  const completion = await apiErrorOf(client.completions.create({ model: "llava-tiny", prompt: "red" }));
  assert.equal(completion.status, 400);
  assert.equal((completion.error as { param: string }).param, "model");
});
