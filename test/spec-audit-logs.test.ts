// Spec audit: decisions.md "Keys in logs: never" and issue 3.6 "x-request-id on every log line of the request".
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { startServer, type TestServer } from "../harness/server.ts";
import { until } from "./helpers/wait-for.ts";

let srv: TestServer;
const lines: string[] = [];

before(async () => {
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
      done();
    },
  });
  srv = await startServer(
    {
      logLevel: "debug",
      models: [{ id: "chat-m", engine: "llama", source: "/nonexistent/chat.gguf", capabilities: ["chat"], load: "lazy" }],
    },
    { logger: { level: "debug", stream } },
  );
});

after(async () => {
  await srv?.close();
});

test("decisions.md keys never appear in logs: valid, bad-checksum, unknown and revoked keys, in any header", async () => {
  const { key } = await srv.createKey();
  const badChecksum = key.slice(0, -1) + (key.endsWith("A") ? "B" : "A");
  const { key: unknown } = await srv.createKey();
  const secrets = [key, badChecksum, unknown];
  const calls: [string, RequestInit][] = [
    [`${srv.baseURL}/models`, { headers: { authorization: `Bearer ${key}` } }],
    [`${srv.baseURL}/models`, { headers: { authorization: `Bearer ${badChecksum}` } }],
    [`${srv.baseURL}/models`, { headers: { authorization: `Basic ${key}` } }],
    [`${srv.baseURL}/models`, { headers: { authorization: key } }],
    [`${srv.baseURL}/nope`, { headers: { authorization: `Bearer ${key}` } }],
    [`${srv.baseURL}/chat/completions`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: "{bad" }],
    [`${srv.baseURL}/chat/completions`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body: JSON.stringify({ model: "nope", messages: [{ role: "user", content: "x" }] }) }],
  ];
  const ids: string[] = [];
  for (const [url, init] of calls) {
    const res = await srv.fetch(url, init);
    await res.arrayBuffer();
    ids.push(res.headers.get("x-request-id")!);
  }
  const accessLine = (id: string) => lines.some((l) => l.includes(`"reqId":"${id}"`) && l.includes(`"msg":"request"`));
  await until(() => ids.every(accessLine), "every request's access-log line", 5000);
  assert.ok(lines.length > 0, "the server logged something");
  for (const line of lines) {
    for (const secret of secrets) {
      // The random body of a key (after its display prefix) must never be logged.
      assert.ok(!line.includes(secret.slice(12)), `a key leaked into the log: ${line.slice(0, 300)}`);
    }
  }
});

test("issue 3.6 every log line of a request carries its x-request-id", async () => {
  const { key } = await srv.createKey();
  const id = "audit-log-line-1";
  const res = await srv.post("/v1/chat/completions", { model: "nope", messages: [{ role: "user", content: "x" }] }, { key, headers: { "x-request-id": id } });
  assert.equal(res.status, 404);
  assert.equal(res.headers.get("x-request-id"), id);
  await res.arrayBuffer();
  await until(() => lines.some((l) => l.includes(`"reqId":"${id}"`) && l.includes(`"msg":"request"`)), "the access-log line", 5000);
  const ofRequest = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => JSON.stringify(l).includes(id));
  // Issue 19: one access-log line per request replaces Fastify's two (request, response).
  const access = ofRequest.filter((l) => l.msg === "request");
  assert.equal(access.length, 1, `one access line: ${JSON.stringify(ofRequest)}`);
  assert.equal(access[0].status, 404);
  assert.equal(access[0].code, "model_not_found");
  for (const l of ofRequest) assert.equal(l.reqId, id, JSON.stringify(l));
});
