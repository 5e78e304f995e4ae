import assert from "node:assert/strict";
import path from "node:path";
import { after, before, test } from "node:test";
import sharp from "sharp";
import type { ModelEntry } from "../src/config/app-config.ts";
import type { ChatDelta, ChatRequest } from "../src/engines/engine.ts";
import { OnnxVlmEngine, vlmLayout } from "../src/engines/onnx/onnx-vlm-engine.ts";
import { AppError } from "../src/errors/app-error.ts";
import { checkCapabilities } from "../src/engines/capabilities.ts";
import { modelEntry } from "./helpers/model-entry.ts";

const llavaPath = path.resolve(import.meta.dirname, "../../shared/models/forged/llava-tiny");

function entry(overrides: Partial<ModelEntry> = {}): ModelEntry {
  return modelEntry({ id: "llava-tiny", engine: "onnx", source: llavaPath, capabilities: ["chat", "vision"], queueSize: 8 }, overrides);
}

function request(parts: ChatRequest["messages"][number]["content"], extra: Partial<ChatRequest> = {}): ChatRequest {
  return {
    messages: [{ role: "user", content: parts }],
    maxTokens: null,
    temperature: null,
    topP: null,
    seed: null,
    stop: [],
    tools: [],
    toolChoice: "auto",
    responseFormat: "text",
    topLogprobs: null,
    ...extra,
  };
}

async function png(r: number, g: number, b: number): Promise<Uint8Array> {
  return new Uint8Array(await sharp({ create: { width: 16, height: 16, channels: 3, background: { r, g, b } } }).png().toBuffer());
}

let engine: OnnxVlmEngine;
before(async () => {
  engine = new OnnxVlmEngine(entry());
  await engine.load();
});
after(async () => {
  await engine.unload();
});

test("VLM engine: the window is the model's trained context unless the catalog entry narrows it", async () => {
  assert.equal(engine.contextSize, 4096);
  assert.equal(vlmLayout("llava"), "llava");
  assert.equal(vlmLayout("idefics3"), "text-first");
  assert.equal(vlmLayout("qwen2_vl"), "text-first");
});

test("VLM engine: prepareChat counts image tokens; chat yields the colour then done with usage", async () => {
  const req = request([
    { type: "text", text: "colour?" },
    { type: "image", data: await png(0, 200, 0), mime: "image/png", param: "messages[0].content[1]", urlParam: "messages[0].content[1].image_url.url" },
  ]);
  const prepared = await engine.prepareChat(req);
  const without = await engine.prepareChat(request([{ type: "text", text: "colour?" }]));
  assert.equal(prepared.promptTokens, without.promptTokens + 1);
  assert.equal(prepared.maxTokens, 4096 - prepared.promptTokens);
  const deltas: ChatDelta[] = [];
  for await (const run of engine.chat(req, prepared, new AbortController().signal)) deltas.push(...run);
  assert.deepEqual(deltas, [
    { type: "content", text: "green" },
    { type: "done", finishReason: "stop", usage: { promptTokens: prepared.promptTokens, completionTokens: 1 } },
  ]);
});

test("VLM engine: an aborted signal rejects the chat with its reason and the worker stays usable", async () => {
  const req = request([{ type: "image", data: await png(200, 0, 0), mime: "image/png", param: "messages[0].content[0]", urlParam: "messages[0].content[0].image_url.url" }]);
  const prepared = await engine.prepareChat(req);
  const controller = new AbortController();
  controller.abort(new Error("client went away"));
  await assert.rejects(async () => {
    for await (const _ of engine.chat(req, prepared, controller.signal)) void _;
  }, /client went away/);
  const deltas: ChatDelta[] = [];
  for await (const run of engine.chat(req, prepared, new AbortController().signal)) deltas.push(...run);
  assert.deepEqual(deltas[0], { type: "content", text: "red" });
});

test("VLM engine: an undecodable image is 400 naming the part's url; unsupported options are 400 too", async () => {
  const broken = request([{ type: "image", data: new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3]), mime: "image/png", param: "messages[0].content[0]", urlParam: "messages[0].content[0].image_url.url" }]);
  await assert.rejects(engine.prepareChat(broken), (err: unknown) => err instanceof AppError && err.code === "invalid_parameter" && err.param === "messages[0].content[0].image_url.url");
  // What the engine can do is data (engine.support), checked by the one capability function: even an entry that
  // claimed JSON mode and logprobs would be refused them, by the engine's own declaration.
  const overclaiming = entry({ capabilities: ["chat", "vision", "json", "logprobs", "tools"] });
  for (const e of [entry(), overclaiming]) {
    assert.throws(
      () => checkCapabilities(e, engine.support, "chat", request("hi", { responseFormat: "json_object" })),
      (err: unknown) => err instanceof AppError && err.code === "invalid_parameter" && err.param === "response_format",
    );
    assert.throws(
      () => checkCapabilities(e, engine.support, "chat", request("hi", { topLogprobs: 0 })),
      (err: unknown) => err instanceof AppError && err.code === "invalid_parameter" && err.param === "logprobs",
    );
  }
});
