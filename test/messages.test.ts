import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { startServer, modelsDir, type TestServer } from "../harness/server.ts";
import { usageRows } from "./helpers/usage.ts";
import { parseNamedSse } from "./helpers/sse.ts";

let srv: TestServer;
let key: string;
let keyId: string;
let accountId: string;
let client: Anthropic;

const forged = path.join(modelsDir, "forged/stories260K-chatml-tools.gguf");

before(async () => {
  srv = await startServer({
    models: [
      { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, parallel: 1, threads: 1 },
      { id: "tools", engine: "llama", source: forged, capabilities: ["chat", "tools"], contextSize: 2048, parallel: 1, threads: 1 },
      { id: "think", engine: "llama", source: forged, capabilities: ["chat", "reasoning"], contextSize: 2048, parallel: 1, threads: 1 },
    ],
  });
  ({ key, id: keyId, accountId } = await srv.createKey());
  client = srv.anthropic(key);
});

after(async () => {
  await srv?.close();
});

const anthropicHeaders = { "anthropic-version": "2023-06-01" };
const post = (target: string, body: Record<string, unknown>, headers: Record<string, string> = { "x-api-key": key }) =>
  srv.post(target, body, { headers: { ...anthropicHeaders, ...headers } });

/** Anthropic's envelope of an error answer, with its status. */
async function anthropicErrorOf(res: Response): Promise<{ status: number; type: string; message: string }> {
  const body = (await res.json()) as { type: string; error: { type: string; message: string } };
  assert.equal(body.type, "error", JSON.stringify(body));
  assert.equal(typeof body.error.message, "string");
  return { status: res.status, type: body.error.type, message: body.error.message };
}

test("issue 44.1 messages.create (@anthropic-ai/sdk): a message object with text, stop_reason and usage, recorded as chat", async () => {
  const message = await client.messages.create({ model: "stories", max_tokens: 20, system: "You tell stories.", messages: [{ role: "user", content: "Once upon a time" }] });
  assert.match(message.id, /^msg_/);
  assert.equal(message.type, "message");
  assert.equal(message.role, "assistant");
  assert.equal(message.model, "stories");
  assert.equal(message.content[0]!.type, "text");
  assert.ok(["end_turn", "max_tokens"].includes(message.stop_reason!));
  assert.equal(message.stop_sequence, null);
  assert.ok(message.usage.input_tokens > 0 && message.usage.output_tokens > 0);
  assert.equal(message.usage.cache_read_input_tokens, 0);
  assert.equal(message.usage.cache_creation_input_tokens, 0);
  if (message.usage.output_tokens === 20) assert.equal(message.stop_reason, "max_tokens");
  const rows = await usageRows(srv.server, srv.config, accountId, keyId);
  assert.ok(rows.some(([model, endpoint]) => model === "stories" && endpoint === "chat"), JSON.stringify(rows));
});

test("issue 44.1 stream: Anthropic's event order, and the deltas add up to the final text", async () => {
  const res = await post("/v1/messages?beta=true", { model: "stories", max_tokens: 12, stream: true, messages: [{ role: "user", content: [{ type: "text", text: "Tell me a story", cache_control: { type: "ephemeral" } }] }] }, { "x-api-key": key, "anthropic-beta": "interleaved-thinking-2025-05-14" });
  assert.equal(res.status, 200);
  assert.ok(res.headers.get("request-id"));
  const events = parseNamedSse(await res.text()).filter((e) => e.type !== "ping");
  const types = events.map((e) => e.type);
  const deltas = types.filter((t) => t === "content_block_delta").length;
  assert.ok(deltas >= 1);
  assert.deepEqual(types, ["message_start", "content_block_start", ...Array(deltas).fill("content_block_delta"), "content_block_stop", "message_delta", "message_stop"]);
  assert.ok(events[0]!.message.usage.input_tokens > 0);
  assert.deepEqual(events[1]!.content_block, { type: "text", text: "" });
  assert.equal(events.at(-2)!.delta.stop_reason, "max_tokens");
  assert.equal(events.at(-2)!.usage.output_tokens, 12);
});

test("issue 44.1 messages.stream (@anthropic-ai/sdk): finalMessage() matches the streamed text", async () => {
  const stream = client.messages.stream({ model: "stories", max_tokens: 40, messages: [{ role: "user", content: "The dog" }] });
  let streamed = "";
  stream.on("text", (text) => (streamed += text));
  const final = await stream.finalMessage();
  assert.equal(final.content[0]!.type === "text" && final.content[0]!.text, streamed);
  assert.ok(final.usage.output_tokens > 0);
});
