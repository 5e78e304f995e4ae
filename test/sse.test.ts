import { test } from "node:test";
import assert from "node:assert/strict";
import Fastify from "fastify";
import { SseStream } from "../src/http/sse.ts";
import { SseReader } from "../src/engines/upstream/sse-events.ts";
import { AppError } from "../src/errors/app-error.ts";
import { parseSse } from "./helpers/sse.ts";
import { until } from "./helpers/wait-for.ts";

/** The SSE writer on a real Fastify server; the keep-alive period is shortened from 15 s so the test is quick. */
async function serve(handler: (sse: SseStream) => Promise<void>): Promise<{ text: string; headers: Headers; status: number }> {
  const app = Fastify();
  app.get("/s", async (_request, reply) => {
    reply.header("x-request-id", "req-1");
    await handler(new SseStream(reply, 40));
    return reply;
  });
  await app.listen({ port: 0, host: "127.0.0.1" });
  try {
    const address = app.server.address() as { port: number };
    const res = await fetch(`http://127.0.0.1:${address.port}/s`);
    return { text: await res.text(), headers: res.headers, status: res.status };
  } finally {
    await app.close();
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test("issue 5.2 while queued before the first token, `: keep-alive` comments go out; they stop at the first frame", async () => {
  const { text, headers, status } = await serve(async (sse) => {
    sse.keepAliveUntilFirstFrame();
    await until(() => sse.committed, "the first keep-alive (headers go out with it)", 5000, 10);
    sse.send({ n: 1 });
    await sleep(150); // an absence: several keep-alive periods with none after the first frame
    sse.done();
  });
  assert.equal(status, 200);
  assert.match(headers.get("content-type") ?? "", /^text\/event-stream/);
  assert.equal(headers.get("x-request-id"), "req-1", "headers set on the reply before the stream are kept");
  const [before, after] = text.split('data: {"n":1}\n\n');
  assert.ok(before.length > 0 && /^(: keep-alive\n\n)+$/.test(before), JSON.stringify(before));
  assert.equal(after, "data: [DONE]\n\n", "no keep-alive after the first frame");
  const parsed = parseSse(text);
  assert.deepEqual(parsed.events, [{ n: 1 }]);
  assert.ok(parsed.done && parsed.comments.every((c) => c === "keep-alive") && parsed.comments.length > 0);
});

test("decisions.md an error after the stream began is one error frame and no [DONE]", async () => {
  const { text } = await serve(async (sse) => {
    sse.send({ n: 1 });
    sse.fail(new AppError("internal_error"));
  });
  const { events, done } = parseSse(text);
  assert.equal(events.length, 2);
  assert.equal(done, false);
  const error = events[1];
  assert.deepEqual(Object.keys(error.error).sort(), ["code", "message", "param", "type"]);
  assert.equal(error.error.code, "internal_error");
  assert.doesNotMatch(text, /\[DONE\]/);
});

test("upstream SSE reader: a character split across two reads stays whole, a leading BOM is dropped, [DONE] ends the events", () => {
  const reader = new SseReader();
  const bytes = Buffer.from('\uFEFFdata: {"t":"é€"}\n\ndata: {"t":"ok"}\n\ndata: [DONE]\n\ndata: {"t":"after"}\n\n');
  // Cut inside "€" (3 bytes in UTF-8): the first read ends on its first byte.
  const cut = bytes.indexOf(Buffer.from("€")) + 1;
  const first = reader.feed(bytes.subarray(0, cut));
  const second = reader.feed(bytes.subarray(cut));
  assert.deepEqual(first, []);
  assert.deepEqual(
    [...second, ...reader.end()].map((e) => e.data),
    ['{"t":"é€"}', '{"t":"ok"}'],
  );
});
