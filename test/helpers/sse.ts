import assert from "node:assert/strict";

/** A server-sent event stream as the tests read it (§6 framing checked byte for byte). */
export interface SseBody {
  /** The JSON of every `data:` frame before `[DONE]`, in order (chunks, or error envelopes). */
  events: any[];
  /** Whether the stream ended with `data: [DONE]`. */
  done: boolean;
  /** `: comment` lines (keep-alives). */
  comments: string[];
  raw: string;
}

/**
 * Splits a complete body into frames and checks the §6 framing: every frame is `data: <payload>` or a `: comment`,
 * each followed by a blank line, and nothing comes after `data: [DONE]`.
 */
export function parseSse(raw: string): SseBody {
  const body: SseBody = { events: [], done: false, comments: [], raw };
  if (raw.length === 0) return body;
  assert.ok(raw.endsWith("\n\n"), `the stream ends with a blank line: ${JSON.stringify(raw.slice(-40))}`);
  for (const frame of raw.slice(0, -2).split("\n\n")) {
    assert.ok(!body.done, "nothing after data: [DONE]");
    if (frame.startsWith(": ")) {
      body.comments.push(frame.slice(2));
      continue;
    }
    assert.ok(frame.startsWith("data: ") && !frame.includes("\n"), `event line format: ${JSON.stringify(frame)}`);
    const data = frame.slice("data: ".length);
    if (data === "[DONE]") body.done = true;
    else body.events.push(JSON.parse(data));
  }
  return body;
}

/** Reads a whole event-stream response and parses it. */
export async function readSse(res: Response): Promise<SseBody> {
  assert.match(res.headers.get("content-type") ?? "", /^text\/event-stream/);
  return parseSse(await res.text());
}

/**
 * Yields the frames of a stream as they arrive (`data:` payloads, JSON-parsed, or "[DONE]"), for tests that act
 * mid-stream (abort after the first token, kill a server). Stops at the end of the body.
 */
export async function* sseFrames(res: Response): AsyncGenerator<any> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (!frame.startsWith("data: ")) continue;
        const data = frame.slice("data: ".length);
        yield data === "[DONE]" ? "[DONE]" : JSON.parse(data);
      }
    }
  } finally {
    reader.releaseLock();
  }
}

/**
 * Checks a finished chat stream against §6 byte for byte: every frame re-serialises to exactly the bytes sent
 * (key order `id, object, created, model, choices[, usage]`, no spaces), one id/created/model throughout, the first
 * chunk's delta is `{role: "assistant", content: ""}`, middle chunks have no finish_reason, the last choice chunk
 * has an empty delta and the finish_reason, an optional usage chunk follows with `choices: []`, then `[DONE]`.
 * Returns the streamed text, reasoning, tool calls and finish reason.
 */
export function assertChatFraming(body: SseBody, model: string): { content: string; reasoning: string; finishReason: string; usage: any; toolCalls: any[] } {
  assert.ok(body.done, "the stream ends with data: [DONE]");
  const [first] = body.events;
  assert.ok(first, "at least one chunk");
  const usageChunk = body.events.at(-1).choices.length === 0 ? body.events.at(-1) : null;
  const chunks = usageChunk ? body.events.slice(0, -1) : body.events;
  const canonical = (e: any) => {
    const choice = e.choices.map((c: any) => ({ index: c.index, delta: c.delta, logprobs: c.logprobs, finish_reason: c.finish_reason }));
    return JSON.stringify({ id: e.id, object: e.object, created: e.created, model: e.model, choices: choice, ...("usage" in e ? { usage: e.usage } : {}) });
  };
  const rebuilt = body.events.map((e) => `data: ${canonical(e)}\n\n`).join("") + "data: [DONE]\n\n";
  assert.equal(body.raw.replace(/^: [^\n]*\n\n/gm, ""), rebuilt, "every frame is exactly the §6 serialisation");
  let content = "";
  let reasoning = "";
  const toolCalls: any[] = [];
  for (const e of body.events) {
    assert.equal(e.id, first.id);
    assert.equal(e.created, first.created);
    assert.equal(e.model, model);
    assert.equal(e.object, "chat.completion.chunk");
  }
  assert.deepEqual(first.choices[0].delta, { role: "assistant", content: "" }, "the first delta");
  const last = chunks.at(-1);
  assert.deepEqual(last.choices[0].delta, {}, "the final chunk's delta is empty");
  assert.ok(["stop", "length", "tool_calls"].includes(last.choices[0].finish_reason));
  for (const e of chunks.slice(1, -1)) {
    assert.equal(e.choices[0].finish_reason, null);
    const d = e.choices[0].delta;
    content += d.content ?? "";
    reasoning += d.reasoning_content ?? "";
    for (const call of d.tool_calls ?? []) {
      const slot = (toolCalls[call.index] ??= { id: call.id, name: call.function.name, arguments: "" });
      slot.arguments += call.function.arguments;
    }
  }
  return { content, reasoning, finishReason: last.choices[0].finish_reason, usage: usageChunk?.usage ?? null, toolCalls };
}

/** A Responses API stream: every frame is `event: <type>` then `data: <json>` whose `type` is the same; no [DONE]. */
export function parseNamedSse(raw: string): { type: string; sequence_number: number; [field: string]: any }[] {
  assert.ok(raw.endsWith("\n\n"), `the stream ends with a blank line: ${JSON.stringify(raw.slice(-40))}`);
  return raw
    .slice(0, -2)
    .split("\n\n")
    .filter((frame) => !frame.startsWith(": "))
    .map((frame) => {
      const match = /^event: ([a-z_.]+)\ndata: (.+)$/.exec(frame);
      assert.ok(match, `frame format: ${JSON.stringify(frame)}`);
      const data = JSON.parse(match[2]);
      assert.equal(data.type, match[1], "the event name is the data's type");
      return data;
    });
}
