// test: alone (after a parser error the connection closes within 2 s: a 1 s lingering close, and 1 s to spare)
// Issue 15: no 5xx, no hang, and no answer outside the §7 envelope under hostile HTTP.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { Writable } from "node:stream";
import { toFile } from "openai";
import { modelsDir, startServer, type TestServer } from "../harness/server.ts";
import { RawConnection, head, type RawResponse } from "./helpers/raw-http.ts";
import { readSse } from "./helpers/sse.ts";

let srv: TestServer;
let key: string;
const logLines: string[] = [];

before(async () => {
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      logLines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
      done();
    },
  });
  srv = await startServer(
    {
      server: { headerTimeout: "1s", bodyTimeout: "1s" },
      anonymousRateLimit: { requests: 100000, window: "1m" },
      plans: { big: { rateLimit: { requests: 100000, window: "1m" } } },
      models: [
        { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat", "embeddings"], contextSize: 512, parallel: 2, threads: 1 },
      ],
    },
    { logger: { level: "info", stream } },
  );
  key = (await srv.createKey({ plan: "big" })).key;
});

after(async () => {
  await srv?.close();
});

const connect = () => RawConnection.open(srv.origin, srv.ca);
const auth = () => ({ host: "localhost", authorization: `Bearer ${key}` });

/** The §7 envelope with the decided type and code, a request id, and rate-limit headers. */
function assertEnvelope(res: RawResponse, status: number, code: string, type = "invalid_request_error"): void {
  assert.equal(res.status, status, res.body);
  const body = JSON.parse(res.body) as { error: { type: string; code: string; param: unknown; message: string } };
  assert.deepEqual({ type: body.error.type, code: body.error.code, param: body.error.param }, { type, code, param: null });
  assert.ok(body.error.message.length > 0);
  assert.ok(res.headers["x-request-id"], "x-request-id");
  assert.ok(res.headers["x-ratelimit-limit-requests"], "rate-limit headers");
  assert.equal(res.headers["strict-transport-security"], "max-age=31536000");
}

const multipartBody = (size: number) => {
  const boundary = "b0undary";
  const body = `--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nstories\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\n${"a".repeat(size)}\r\n--${boundary}--\r\n`;
  return { body, type: `multipart/form-data; boundary=${boundary}` };
};

const refused: [string, string, () => { body: string; type: string }][] = [
  ["multipart to an unknown path (/v1/audio/translations)", "POST /v1/audio/translations", () => multipartBody(200_000)],
  ["150 KB application/octet-stream to /v1/embeddings", "POST /v1/embeddings", () => ({ body: "x".repeat(150_000), type: "application/octet-stream" })],
  ["multipart to /v1/chat/completions", "POST /v1/chat/completions", () => multipartBody(200_000)],
  ["multipart to an unknown path outside /v1", "POST /nope", () => multipartBody(200_000)],
  ["a body with the wrong method (PUT /v1/models)", "PUT /v1/models", () => ({ body: JSON.stringify({ pad: "x".repeat(150_000) }), type: "application/json" })],
];

for (const [name, line, make] of refused) {
  test(`issue 15.1 a refused body never hangs the connection: ${name}; the next request on it answers`, async () => {
    const conn = await connect();
    try {
      const { body, type } = make();
      await conn.write(head(`${line} HTTP/1.1`, { ...auth(), "content-type": type, "content-length": Buffer.byteLength(body) }) + body);
      const first = await conn.read(5000);
      assert.ok(first.status >= 400 && first.status < 500, `refused: ${first.status}`);
      assert.ok(JSON.parse(first.body).error.code);
      await conn.write(head("GET /v1/models HTTP/1.1", auth()));
      const second = await conn.read(5000);
      assert.equal(second.status, 200, "the next request on the same connection is answered");
    } finally {
      conn.end();
    }
  });
}

test("issue 15.1 the openai client: audio.translations gets a 404, then models.list works on the same client", async () => {
  const client = srv.openai(key, { timeout: 10_000 });
  const file = await toFile(Buffer.alloc(200_000, 1), "jfk.wav");
  await assert.rejects(client.audio.translations.create({ model: "stories", file }), (err: unknown) => (err as { status?: number }).status === 404);
  const list = await client.models.list();
  assert.deepEqual(list.data.map((m) => m.id), ["stories"]);
});

test("issue 15.2 an 11 MB body with Content-Length and Connection: close gets the 413, not a reset (3 of 3)", async () => {
  for (let i = 0; i < 3; i++) {
    const conn = await connect();
    try {
      const size = 11 * 1024 * 1024;
      await conn.write(head("POST /v1/chat/completions HTTP/1.1", { ...auth(), "content-type": "application/json", "content-length": size, connection: "close" }));
      const chunk = Buffer.alloc(256 * 1024, 0x61);
      for (let sent = 0; sent < size && !conn.closed; sent += chunk.length) {
        await conn.write(chunk.subarray(0, Math.min(chunk.length, size - sent))).catch(() => {});
      }
      const res = await conn.read(10_000);
      assertEnvelope(res, 413, "request_too_large");
      assert.equal(res.headers.connection, "close");
    } finally {
      conn.end();
    }
  }
});

test("issue 15.3 a stream honours Connection: close: the reply says close and the socket closes after [DONE]", async () => {
  const conn = await connect();
  try {
    const body = JSON.stringify({ model: "stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 5, stream: true });
    await conn.write(head("POST /v1/chat/completions HTTP/1.1", { ...auth(), "content-type": "application/json", "content-length": Buffer.byteLength(body), connection: "close" }) + body);
    const res = await conn.read(10_000);
    assert.equal(res.status, 200);
    assert.equal(res.headers.connection, "close");
    assert.match(res.body, /data: \[DONE\]\n\n$/);
    assert.ok(await conn.closedWithin(1000), "the server closed the connection after the stream");
  } finally {
    conn.end();
  }
});

test("issue 15.3 without Connection: close a stream's connection stays usable", async () => {
  const res = await srv.post("/v1/chat/completions", { model: "stories", messages: [{ role: "user", content: "Once" }], max_tokens: 3, stream: true }, { key });
  assert.notEqual(res.headers.get("connection"), "close");
  assert.ok((await readSse(res)).done);
});

const parserCases: [string, string | Buffer, number, string][] = [
  ["a bad percent-escape in the path", head("GET /v1/models%ZZ HTTP/1.1", { host: "localhost" }), 400, "invalid_parameter"],
  ["headers over 16 KB", head("GET /v1/models HTTP/1.1", { host: "localhost", "x-pad": "a".repeat(20_000) }), 431, "request_too_large"],
  ["a 70 KB URL", head(`GET /v1/models?${"q".repeat(70_000)} HTTP/1.1`, { host: "localhost" }), 431, "request_too_large"],
  ["a negative Content-Length", head("POST /v1/embeddings HTTP/1.1", { host: "localhost", "content-length": -1 }), 400, "invalid_parameter"],
  ["a non-numeric Content-Length", head("POST /v1/embeddings HTTP/1.1", { host: "localhost", "content-length": "abc" }), 400, "invalid_parameter"],
  ["two different Content-Lengths", "POST /v1/embeddings HTTP/1.1\r\nhost: localhost\r\ncontent-length: 5\r\ncontent-length: 7\r\n\r\nhello", 400, "invalid_parameter"],
  ["Content-Length with Transfer-Encoding", head("POST /v1/embeddings HTTP/1.1", { host: "localhost", "content-length": 5, "transfer-encoding": "chunked" }) + "0\r\n\r\n", 400, "invalid_parameter"],
  ["a NUL in a header", Buffer.from("GET /v1/models HTTP/1.1\r\nhost: localhost\r\nx-bad: a\u0000b\r\n\r\n", "latin1"), 400, "invalid_parameter"],
  ["a bad chunk size", head("POST /v1/embeddings HTTP/1.1", { host: "localhost", "transfer-encoding": "chunked", "content-type": "application/json" }) + "zz\r\nabc\r\n0\r\n\r\n", 400, "invalid_parameter"],
  ["an unknown method", head("BREW /v1/models HTTP/1.1", { host: "localhost" }), 400, "invalid_parameter"],
  ["an HTTP/1.1 request without Host (issue 29.10)", "GET /v1/models HTTP/1.1\r\n\r\n", 400, "invalid_parameter"],
  ["an Expect other than 100-continue (issue 29.10)", head("GET /v1/models HTTP/1.1", { host: "localhost", expect: "the-moon" }), 417, "invalid_parameter"],
];

// Concurrently: after a parser error the server lingers until nothing has arrived for a second (http/lingering-close.ts).
describe("issue 15.4 the answers of the raw HTTP layer", { concurrency: true }, () => {
  for (const [name, bytes, status, code] of parserCases) {
    test(`issue 15.4 ${name}: ${status} in the §7 envelope with x-request-id and rate-limit headers, then the connection closes`, async () => {
      const conn = await connect();
      try {
        await conn.write(bytes);
        const res = await conn.read(5000);
        assertEnvelope(res, status, code);
        assert.equal(res.headers.connection, "close");
        assert.ok(await conn.closedWithin(2000), "closed after the answer");
      } finally {
        conn.end();
      }
    });
  }
});

/**
 * Answers made outside the route hooks (Fastify's bad-URL path, Node's parser errors and unknown Expect): each closes
 * the connection, and a body still arriving must be read and thrown away before the close, or the client gets EPIPE
 * or a reset instead of the answer. The body goes in 16 KB writes, as a client on a network sends it.
 */
const unreadBodies: [string, (body: string, type: string) => string, number][] = [
  ["a path that cannot be decoded (POST /v1/embeddings%ZZ)", (body, type) => head("POST /v1/embeddings%ZZ HTTP/1.1", { ...auth(), "content-type": type, "content-length": Buffer.byteLength(body) }), 400],
  ["an Expect other than 100-continue", (body, type) => head("POST /v1/embeddings HTTP/1.1", { ...auth(), expect: "the-moon", "content-type": type, "content-length": Buffer.byteLength(body) }), 417],
  ["a Content-Length that is not a number", (_body, type) => head("POST /v1/embeddings HTTP/1.1", { ...auth(), "content-type": type, "content-length": "abc" }), 400],
  ["a NUL in a header", (body, type) => `POST /v1/embeddings HTTP/1.1\r\nhost: localhost\r\nx-bad: a\u0000b\r\ncontent-type: ${type}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n`, 400],
];

for (const [name, headOf, status] of unreadBodies) {
  test(`issue 42.13 a 150 KB body sent with ${name} is read before the connection closes: 15 of 15 fresh connections read the ${status}, none gets EPIPE`, async () => {
    const { body, type } = multipartBody(150_000);
    const bytes = Buffer.from(body, "latin1");
    const outcomes = await Promise.all(
      Array.from({ length: 15 }, async () => {
        const conn = await connect();
        try {
          await conn.write(Buffer.from(headOf(body, type), "latin1"));
          for (let at = 0; at < bytes.length; at += 16_384) {
            await conn.write(bytes.subarray(at, at + 16_384));
            await new Promise((r) => setImmediate(r));
          }
          const res = await conn.read(5000);
          assertEnvelope(res, status, "invalid_parameter");
          assert.equal(res.headers.connection, "close");
          return "answered";
        } catch (err) {
          return (err as NodeJS.ErrnoException).code ?? String(err);
        } finally {
          conn.end();
        }
      }),
    );
    assert.deepEqual(outcomes.filter((o) => o !== "answered"), []);
  });
}

test("issue 29.10 Expect: 100-continue over the plan's limit gets the 413 without a 100 Continue, and the connection closes at once", async () => {
  const conn = await connect();
  try {
    const size = 11 * 1024 * 1024;
    await conn.write(head("POST /v1/chat/completions HTTP/1.1", { ...auth(), "content-type": "application/json", "content-length": size, expect: "100-continue" }));
    const res = await conn.read(5000);
    assertEnvelope(res, 413, "request_too_large");
    assert.equal(res.headers.connection, "close", "the server does not wait for a body it told the client not to send");
    assert.ok(await conn.closedWithin(2000), "closed after the answer, not left waiting for the body");
  } finally {
    conn.end();
  }
});

test("issue 29.10 Expect: 100-continue without a key gets the 401 without a 100 Continue; within the limit it gets 100 Continue, then the answer", async () => {
  const refused = await connect();
  try {
    await refused.write(head("POST /v1/embeddings HTTP/1.1", { host: "localhost", "content-type": "application/json", "content-length": 1000, expect: "100-continue" }));
    const res = await refused.read(5000);
    assert.equal(res.status, 401, res.body);
    assert.equal(res.headers.connection, "close");
    assert.ok(await refused.closedWithin(2000));
  } finally {
    refused.end();
  }
  const conn = await connect();
  try {
    const body = JSON.stringify({ model: "stories", input: "hello" });
    await conn.write(head("POST /v1/embeddings HTTP/1.1", { ...auth(), "content-type": "application/json", "content-length": Buffer.byteLength(body), expect: "100-continue" }));
    const interim = await conn.read(5000);
    assert.equal(interim.status, 100, "100 Continue once the request is accepted");
    await conn.write(body);
    const res = await conn.read(10_000);
    assert.equal(res.status, 200, res.body);
    await conn.write(head("GET /v1/models HTTP/1.1", auth()));
    assert.equal((await conn.read(5000)).status, 200, "the connection stays usable");
  } finally {
    conn.end();
  }
});

test("issue 15.8 headers that never finish (slowloris) get 408 naming the headers, then the connection closes", async () => {
  const conn = await connect();
  try {
    await conn.write("GET /v1/models HTTP/1.1\r\nhost: localhost\r\nx-slow: 1\r\n");
    const started = Date.now();
    const res = await conn.read(6000);
    assertEnvelope(res, 408, "invalid_parameter");
    assert.match(JSON.parse(res.body).error.message, /headers/);
    assert.ok(Date.now() - started < 4000, `answered after ${Date.now() - started} ms (headerTimeout 1 s)`);
    assert.ok(await conn.closedWithin(2000));
  } finally {
    conn.end();
  }
});

test("issue 15.8 a body that stops after 1 of 100 bytes gets 408 naming the body, then the connection closes", async () => {
  const conn = await connect();
  try {
    await conn.write(head("POST /v1/embeddings HTTP/1.1", { ...auth(), "content-type": "application/json", "content-length": 100 }) + "{");
    const started = Date.now();
    const res = await conn.read(6000);
    assertEnvelope(res, 408, "invalid_parameter");
    assert.match(JSON.parse(res.body).error.message, /body/);
    assert.ok(Date.now() - started < 4000, `answered after ${Date.now() - started} ms (bodyTimeout 1 s)`);
    assert.ok(await conn.closedWithin(2000));
  } finally {
    conn.end();
  }
});

test("issue 15.8 a multipart upload that stalls gets 408 too", async () => {
  const conn = await connect();
  try {
    const { body, type } = multipartBody(1000);
    await conn.write(head("POST /v1/audio/transcriptions HTTP/1.1", { ...auth(), "content-type": type, "content-length": Buffer.byteLength(body) }) + body.slice(0, 150));
    const res = await conn.read(6000);
    assertEnvelope(res, 408, "invalid_parameter");
    assert.ok(await conn.closedWithin(2000));
  } finally {
    conn.end();
  }
});

test("issue 15.10 a key in the query string never reaches the log; the path is logged without the query", async () => {
  logLines.length = 0;
  const res = await srv.get(`/v1/models?api_key=${key}&x=1`, { key });
  assert.equal(res.status, 200);
  await new Promise((r) => setTimeout(r, 50));
  assert.ok(logLines.length > 0, "the request was logged");
  for (const line of logLines) {
    assert.doesNotMatch(line, new RegExp(key.slice(0, 20)));
    assert.doesNotMatch(line, /api_key/);
  }
  assert.ok(logLines.some((l) => l.includes('"/v1/models"')), "the path is logged");
});

test("issue 15.11 TLS 1.2 refuses CBC/SHA-1 suites and accepts ECDHE AES-GCM; HSTS is on every response", async () => {
  await assert.rejects(RawConnection.open(srv.origin, srv.ca, { maxVersion: "TLSv1.2", ciphers: "AES128-SHA:ECDHE-RSA-AES128-SHA" }));
  const gcm = await RawConnection.open(srv.origin, srv.ca, { maxVersion: "TLSv1.2", ciphers: "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES128-GCM-SHA256" });
  try {
    await gcm.write(head("GET /healthz HTTP/1.1", { host: "localhost" }));
    const res = await gcm.read();
    assert.equal(res.status, 200);
    assert.equal(res.headers["strict-transport-security"], "max-age=31536000");
  } finally {
    gcm.end();
  }
  for (const res of [await srv.get("/v1/nope", { key }), await srv.get("/v1/models"), await srv.get("/readyz")]) {
    assert.equal(res.headers.get("strict-transport-security"), "max-age=31536000");
  }
});
