import { test } from "node:test";
import assert from "node:assert/strict";
import { toChatHistory } from "../src/engines/llama/chat-history.ts";
import { decodeImagePart } from "../src/features/generation/image-parts.ts";
import { StreamBatcher, type OutputDelta } from "../src/features/generation/stream-batcher.ts";
import { AppError } from "../src/errors/app-error.ts";

const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3]);
const jpeg = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 0x10]);

function appError(fn: () => unknown, param: string): void {
  assert.throws(fn, (err: unknown) => err instanceof AppError && err.code === "invalid_parameter" && err.param === param);
}

test("§2.2 image parts: base64 data URLs of PNG and JPEG decode; anything else is 400 on .image_url.url", () => {
  const p = decodeImagePart(`data:image/png;base64,${png.toString("base64")}`, "messages[0].content[1]");
  assert.equal(p.mime, "image/png");
  assert.deepEqual([...p.data], [...png]);
  assert.equal(p.param, "messages[0].content[1]");
  assert.equal(decodeImagePart(`data:image/jpeg;base64,${jpeg.toString("base64")}`, "x").mime, "image/jpeg");
  const at = "messages[0].content[1].image_url.url";
  appError(() => decodeImagePart("https://example.com/cat.png", "messages[0].content[1]"), at);
  appError(() => decodeImagePart(`data:image/gif;base64,${png.toString("base64")}`, "messages[0].content[1]"), at);
  appError(() => decodeImagePart(`data:image/png;base64,${jpeg.toString("base64")}`, "messages[0].content[1]"), at);
  appError(() => decodeImagePart("data:image/png;base64,!!!", "messages[0].content[1]"), at);
});

test("tool round trip history: calls and their results join one model response; unknown or unanswered ids are 400", () => {
  const history = toChatHistory([
    { role: "system", content: "sys" },
    { role: "user", content: "weather?" },
    { role: "assistant", content: null, toolCalls: [{ id: "c1", name: "w", arguments: '{"city":"Paris"}' }] },
    { role: "tool", toolCallId: "c1", content: '{"t":21}' },
  ]);
  assert.equal(history.length, 3);
  const model = history[2];
  assert.equal(model.type, "model");
  if (model.type !== "model") return;
  const call = model.response[0] as { type: string; name: string; params: unknown; result: unknown };
  assert.equal(call.type, "functionCall");
  assert.deepEqual(call.params, { city: "Paris" });
  assert.deepEqual(call.result, { t: 21 });

  appError(() => toChatHistory([{ role: "user", content: "x" }, { role: "tool", toolCallId: "nope", content: "1" }]), "messages[1].tool_call_id");
  appError(
    () =>
      toChatHistory([
        { role: "assistant", content: null, toolCalls: [{ id: "c1", name: "w", arguments: "{}" }] },
        { role: "user", content: "next" },
      ]),
    "messages[0].tool_calls[0]",
  );
  appError(() => toChatHistory([{ role: "assistant", content: null, toolCalls: [{ id: "c1", name: "w", arguments: "{not json" }] }]), "messages[0].tool_calls[0].function.arguments");
});

test("history always ends in a model response to generate into", () => {
  const history = toChatHistory([{ role: "user", content: "hi" }]);
  assert.deepEqual(history.at(-1), { type: "model", response: [] });
});

test("the stream coalescer merges text deltas of one kind and argument fragments of one call, nothing else", () => {
  const sent: OutputDelta[] = [];
  // A window longer than the test: after the first event, everything waits for the next flush.
  const batcher = new StreamBatcher((d) => sent.push(d), 60_000);
  batcher.add({ type: "reasoning", text: "a" });
  batcher.add({ type: "reasoning", text: "b" });
  batcher.add({ type: "reasoning", text: "c" });
  batcher.add({ type: "content", text: "d" });
  batcher.add({ type: "content", text: "e" });
  batcher.add({ type: "tool_call", index: 0, id: "x", name: "f", arguments: "" });
  batcher.add({ type: "tool_call", index: 0, arguments: "{" });
  batcher.add({ type: "tool_call", index: 0, arguments: "}" });
  batcher.add({ type: "tool_call", index: 1, id: "y", name: "g", arguments: "{}" });
  batcher.flush();
  assert.deepEqual(sent, [
    { type: "reasoning", text: "a" },
    { type: "reasoning", text: "bc" },
    { type: "content", text: "de" },
    { type: "tool_call", index: 0, id: "x", name: "f", arguments: "{}" },
    { type: "tool_call", index: 1, id: "y", name: "g", arguments: "{}" },
  ]);
});
