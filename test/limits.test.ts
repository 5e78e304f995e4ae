import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import https from "node:https";
import OpenAI from "openai";
import { readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { testConfig } from "../harness/config.ts";
import { createKey } from "../harness/keys.ts";
import { spawnServer, startServer, tempDir, type TestServer } from "../harness/server.ts";
import { MemoryStore } from "../src/plugins/rate-limit/memory-store.ts";
import { formatResetDuration } from "../src/config/duration.ts";
import { errorOf } from "./helpers/errors.ts";
import { RawConnection, head } from "./helpers/raw-http.ts";
import { statusBytes } from "../harness/full-gc.ts";

const models = [{ id: "test-chat", engine: "llama", source: "/nonexistent/test-chat.gguf", capabilities: ["chat"], load: "lazy" }];
const plans = {
  tiny: { rateLimit: { requests: 3, window: "1h" } },
  retry: { rateLimit: { requests: 1, window: "2s" } },
  small: { maxBodyBytes: 1000, maxUploadBytes: 2000 },
  uploads: { maxUploadBytes: 4 * 1024 * 1024 },
};
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

function limitHeaders(res: Response) {
  return {
    limit: res.headers.get("x-ratelimit-limit-requests"),
    remaining: res.headers.get("x-ratelimit-remaining-requests"),
    reset: res.headers.get("x-ratelimit-reset-requests"),
  };
}

/** Posts over raw HTTPS, writing `total` bytes in 64 KB chunks (backpressure respected) until the server answers. */
function streamPost(s: TestServer, path: string, headers: Record<string, string>, total: number, onProgress?: () => void, prefix = '{"model":"test-chat","pad":"') {
  return new Promise<{ status: number; body: string; sent: number; headers: Record<string, unknown> }>((resolve, reject) => {
    const chunk = Buffer.alloc(64 * 1024, "a");
    let sent = 0;
    let answered = false;
    const req = https.request(`${s.origin}${path}`, { method: "POST", headers, ca: s.ca, agent: false });
    req.on("response", (res) => {
      answered = true;
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode!, body, sent, headers: res.headers }));
      res.on("error", reject);
    });
    req.on("error", (err) => {
      if (!answered) reject(err);
    });
    const pump = () => {
      while (!answered && sent < total) {
        onProgress?.();
        sent += chunk.length;
        if (!req.write(chunk)) {
          req.once("drain", pump);
          return;
        }
      }
      if (!answered) req.end();
    };
    req.write(prefix);
    pump();
  });
}

describe("rate limits (memory store)", () => {
  let s: TestServer;
  before(async () => {
    s = await startServer({ models, plans, anonymousRateLimit: { requests: 2, window: "1m" } });
  });
  after(() => s?.close());

  test("§8 headers on every response; remaining counts the current request; 429 rate_limit_exceeded with Retry-After", async () => {
    const { key } = await s.createKey({ plan: "tiny" });
    const seen = [];
    for (let i = 0; i < 3; i++) {
      const res = await s.fetch(`${s.baseURL}/models`, { headers: bearer(key) });
      assert.equal(res.status, 200);
      await res.arrayBuffer();
      seen.push(limitHeaders(res));
    }
    assert.deepEqual(seen.map((h) => [h.limit, h.remaining]), [["3", "2"], ["3", "1"], ["3", "0"]]);
    assert.match(seen[0].reset!, /^(1h0m0s|59m5\ds)$/);
    const res = await s.fetch(`${s.baseURL}/models`, { headers: bearer(key) });
    assert.deepEqual(await errorOf(res), { status: 429, type: "rate_limit_error", code: "rate_limit_exceeded", param: null });
    assert.deepEqual([limitHeaders(res).limit, limitHeaders(res).remaining], ["3", "0"]);
    const retryAfter = Number(res.headers.get("retry-after"));
    const retryAfterMs = Number(res.headers.get("retry-after-ms"));
    assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 3600, String(retryAfter));
    assert.ok(retryAfterMs > 3_590_000 && retryAfterMs <= 3_600_000, String(retryAfterMs));
    assert.equal(retryAfter, Math.ceil(retryAfterMs / 1000));
  });

  test("§8 error responses carry the key's headers too (404, 400)", async () => {
    const { key } = await s.createKey();
    const notFound = await s.fetch(`${s.baseURL}/nope`, { headers: bearer(key) });
    assert.equal(notFound.status, 404);
    assert.deepEqual([limitHeaders(notFound).limit, limitHeaders(notFound).remaining], ["600", "599"]);
    const invalid = await s.fetch(`${s.baseURL}/chat/completions`, {
      method: "POST",
      headers: { ...bearer(key), "content-type": "application/json" },
      body: "{not json",
    });
    assert.equal(invalid.status, 400);
    assert.deepEqual([limitHeaders(invalid).limit, limitHeaders(invalid).remaining], ["600", "598"]);
  });

  test("§7 the openai client raises RateLimitError, and its built-in retry succeeds after Retry-After", async () => {
    const { key } = await s.createKey({ plan: "retry" });
    assert.equal((await s.openai(key).models.list()).data.length, 1);
    await assert.rejects(s.openai(key).models.list(), (err: unknown) => {
      assert.ok(err instanceof OpenAI.RateLimitError, String(err));
      assert.equal(err.status, 429);
      assert.equal(err.code, "rate_limit_exceeded");
      assert.ok(Number(err.headers?.get("retry-after")) >= 1);
      return true;
    });
    const started = Date.now();
    const page = await s.openai(key, { maxRetries: 2 }).models.list();
    assert.equal(page.data[0].id, "test-chat");
    assert.ok(Date.now() - started >= 300, "the client waited for the window to free");
  });

  test("decisions: requests without a valid key get the per-address anonymous limiter's headers, then 429", async () => {
    // Other tests in this file use valid keys only, so this address starts with a fresh anonymous window. A key's
    // first request is counted before its lookup, then taken back once the key is found valid.
    const { key } = await s.createKey();
    assert.equal((await s.fetch(`${s.baseURL}/models`, { headers: bearer(key) })).status, 200);
    const first = await s.fetch(`${s.baseURL}/models`);
    assert.equal(first.status, 401);
    assert.deepEqual([limitHeaders(first).limit, limitHeaders(first).remaining], ["2", "1"]);
    // The window opened with the first key lookups of this address (the tests above), seconds ago.
    assert.match(limitHeaders(first).reset!, /^(1m0s|[1-5]?\ds)$/);
    const second = await s.fetch(`${s.baseURL}/models`, { headers: bearer("mg_guess") });
    assert.equal(second.status, 401);
    assert.equal(limitHeaders(second).remaining, "0");
    const third = await s.fetch(`${s.baseURL}/models`, { headers: bearer("mg_guess2") });
    assert.deepEqual(await errorOf(third), { status: 429, type: "rate_limit_error", code: "rate_limit_exceeded", param: null });
    assert.ok(Number(third.headers.get("retry-after")) >= 1);
    // A key this node has seen valid is not slowed by the anonymous limiter of its address; a key it never saw
    // cannot be told from a guess before its database lookup, which is what the limit protects (issue 29.3).
    assert.equal((await s.fetch(`${s.baseURL}/models`, { headers: bearer(key) })).status, 200);
    const unseen = await s.createKey();
    const limited = await s.fetch(`${s.baseURL}/models`, { headers: bearer(unseen.key) });
    assert.deepEqual(await errorOf(limited), { status: 429, type: "rate_limit_error", code: "rate_limit_exceeded", param: null });
    // Public routes are exempt.
    const health = await s.fetch(`${s.origin}/healthz`);
    assert.equal(health.status, 200);
    assert.equal(health.headers.get("x-ratelimit-limit-requests"), null);
  });
});

test("§8 a 429 is not counted: the window stays at its limit (memory store)", async () => {
  let now = 1_000_000;
  const store = new MemoryStore(() => now);
  assert.deepEqual(await store.hit("k", 2, 1000), { count: 1, resetMs: 1000, allowed: true });
  assert.deepEqual(await store.hit("k", 2, 1000), { count: 2, resetMs: 1000, allowed: true });
  now += 400;
  for (let i = 0; i < 5; i++) assert.deepEqual(await store.hit("k", 2, 1000), { count: 2, resetMs: 600, allowed: false });
  now += 600;
  assert.deepEqual(await store.hit("k", 2, 1000), { count: 1, resetMs: 1000, allowed: true });
  await store.close();
});

test("§8 reset durations are whole seconds rounded up: 1s, 6m0s, 1h2m3s", () => {
  assert.equal(formatResetDuration(0.2), "1s");
  assert.equal(formatResetDuration(360), "6m0s");
  assert.equal(formatResetDuration(3723), "1h2m3s");
  assert.equal(formatResetDuration(59.001), "1m0s");
});

describe("size limits", () => {
  let s: TestServer;
  let key: string;
  before(async () => {
    s = await startServer({ models, plans });
    key = (await s.createKey({ plan: "small" })).key;
  });
  after(() => s?.close());

  const json = () => ({ ...bearer(key), "content-type": "application/json" });

  test("§8 413 request_too_large (param null) when Content-Length is over maxBodyBytes", async () => {
    const body = JSON.stringify({ model: "test-chat", messages: [{ role: "user", content: "x".repeat(2000) }] });
    const res = await s.fetch(`${s.baseURL}/chat/completions`, { method: "POST", headers: json(), body });
    assert.deepEqual(await errorOf(res), { status: 413, type: "invalid_request_error", code: "request_too_large", param: null });
    assert.ok(res.headers.get("x-ratelimit-remaining-requests"));
    assert.ok(res.headers.get("x-request-id"));
  });

  test("§8 413 when the body is chunked (no Content-Length) and goes over the limit while streaming", async () => {
    const res = await streamPost(s, "/v1/chat/completions", { ...json(), "transfer-encoding": "chunked" }, 3 * 64 * 1024);
    assert.equal(res.status, 413);
    assert.equal(JSON.parse(res.body).error.code, "request_too_large");
  });

  test("issue 46: a Content-Length within the limit bounds the body (nothing to count): what follows it on the connection is the next request, never more body", async () => {
    const conn = await RawConnection.open(s.origin, s.ca);
    try {
      const body = JSON.stringify({ model: "test-chat" });
      // The declared body, then a request of 5000 bytes more than the plan's 1000-byte limit, on the same connection.
      const next = head("GET /v1/models HTTP/1.1", { host: "localhost", ...bearer(key), "x-pad": "x".repeat(5000) });
      await conn.write(head("POST /v1/chat/completions HTTP/1.1", { host: "localhost", ...json(), "content-length": Buffer.byteLength(body) }) + body + next);
      const first = await conn.read(5000);
      assert.equal(first.status, 400, first.body);
      assert.equal(JSON.parse(first.body).error.param, "messages", "the declared bytes were the whole body: valid JSON without messages");
      const second = await conn.read(5000);
      assert.equal(second.status, 200, second.body);
      assert.equal(JSON.parse(second.body).object, "list");
    } finally {
      conn.end();
    }
  });

  test("issue 46: a chunked body that arrives whole with its headers is measured as it stands: 413 over the limit, read under it", async () => {
    // req.end(body) writes the headers and the one chunk together: the body is complete before the limit is checked.
    const send = (content: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = https.request(`${s.baseURL}/chat/completions`, { method: "POST", headers: { ...json(), "transfer-encoding": "chunked" }, ca: s.ca, agent: false }, (res) => {
          let body = "";
          res.setEncoding("utf8").on("data", (d: string) => (body += d)).on("end", () => resolve({ status: res.statusCode!, body }));
        });
        req.on("error", reject);
        req.end(JSON.stringify({ model: "test-chat", messages: [{ role: "user", content }] }));
      });
    const over = await send("x".repeat(2000));
    assert.equal(over.status, 413);
    assert.equal(JSON.parse(over.body).error.code, "request_too_large");
    const under = await send("x");
    assert.notEqual(under.status, 413, under.body);
    assert.notEqual(JSON.parse(under.body).error?.code, "invalid_parameter", "the body was read and parsed");
  });

  test("§8 a Content-Length over the limit is refused at once, before the body is sent", async () => {
    const answer = await new Promise<number>((resolve, reject) => {
      const req = https.request(`${s.baseURL}/chat/completions`, { method: "POST", headers: { ...json(), "content-length": String(10 ** 9) }, ca: s.ca, agent: false });
      req.on("response", (res) => {
        res.resume();
        resolve(res.statusCode!);
        req.destroy();
      });
      req.on("error", reject);
      req.write("{");
    });
    assert.equal(answer, 413);
  });

  test("a body within the limit passes on to the next check (JSON/schema 400, not 413)", async () => {
    const res = await s.fetch(`${s.baseURL}/chat/completions`, { method: "POST", headers: json(), body: JSON.stringify({ model: "test-chat", messages: [] }) });
    assert.equal(res.status, 400);
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, "invalid_parameter");
  });

  test("§8 a chunked 1 GB body is refused while streaming; server RSS grows < 20 MB", async (t) => {
    const plain = (await s.createKey()).key; // default plan: 10 MB JSON bodies
    global.gc?.();
    const baseline = process.memoryUsage().rss;
    let peak = baseline;
    const sample = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
    try {
      const res = await streamPost(
        s,
        "/v1/chat/completions",
        { ...bearer(plain), "content-type": "application/json", "transfer-encoding": "chunked" },
        1024 ** 3,
        () => (peak = Math.max(peak, process.memoryUsage().rss)),
      );
      assert.equal(res.status, 413);
      assert.ok(res.sent < 200 * 1024 ** 2, `client stopped early (${res.sent} bytes sent)`);
      const growth = (peak - baseline) / 1024 ** 2;
      t.diagnostic(`sent ${(res.sent / 1024 ** 2).toFixed(1)} MB before the 413; RSS peak growth ${growth.toFixed(1)} MB`);
      assert.ok(growth < 20, `RSS grew ${growth.toFixed(1)} MB`);
    } finally {
      clearInterval(sample);
    }
  });
});

describe("upload size limits (POST /v1/audio/transcriptions, multipart)", () => {
  let s: TestServer;
  before(async () => {
    s = await startServer({ models, plans });
  });
  after(() => s?.close());

  const boundary = "mgboundary1234";
  const prefix = `--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\ntest-chat\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\n`;
  const multipart = (key: string) => ({ ...bearer(key), "content-type": `multipart/form-data; boundary=${boundary}` });

  test("§4.4 an upload whose Content-Length is over maxUploadBytes is 413 request_too_large at once", async () => {
    const { key } = await s.createKey({ plan: "small" });
    const body = `${prefix}${"a".repeat(5000)}\r\n--${boundary}--\r\n`;
    const res = await s.fetch(`${s.baseURL}/audio/transcriptions`, { method: "POST", headers: multipart(key), body });
    assert.deepEqual(await errorOf(res), { status: 413, type: "invalid_request_error", code: "request_too_large", param: null });
    assert.ok(res.headers.get("x-ratelimit-limit-requests"));
  });

  test("§4.4 a chunked 1 GB upload is refused while streaming; the server process's RSS grows < 20 MB", async (t) => {
    // A separate server process, so the RSS measured is the server's alone (not this client's TLS buffers).
    const dir = tempDir();
    const raw = { dataDir: dir, logLevel: "warn", models, plans };
    const child = await spawnServer(raw, dir);
    try {
      const { key } = await createKey(testConfig(raw, null), { plan: "uploads" });
      const ca = readFileSync(path.join(dir, "tls", "cert.pem"), "utf8");
      const rssMb = () => statusBytes(child.child.pid!, ["VmRSS"]).VmRSS / 1048576;
      const target = { origin: child.origin, ca } as TestServer;
      // Warm the path once (first-use allocations are not per-request growth), then measure.
      await streamPost(target, "/v1/audio/transcriptions", { ...multipart(key), "transfer-encoding": "chunked" }, 64 * 1024 ** 2, undefined, prefix);
      const baseline = rssMb();
      let peak = baseline;
      const sample = setInterval(() => (peak = Math.max(peak, rssMb())), 10);
      let res;
      try {
        res = await streamPost(target, "/v1/audio/transcriptions", { ...multipart(key), "transfer-encoding": "chunked" }, 1024 ** 3, undefined, prefix);
        await new Promise((r) => setTimeout(r, 200));
      } finally {
        clearInterval(sample);
      }
      assert.equal(res.status, 413, res.body);
      assert.equal(JSON.parse(res.body).error.code, "request_too_large");
      assert.ok(res.sent < 200 * 1024 ** 2, `client stopped early (${res.sent} bytes sent)`);
      const growth = peak - baseline;
      t.diagnostic(`sent ${(res.sent / 1024 ** 2).toFixed(1)} MB before the 413; server RSS ${baseline.toFixed(1)} -> ${peak.toFixed(1)} MB`);
      assert.ok(growth < 20, `server RSS grew ${growth.toFixed(1)} MB`);
    } finally {
      await child.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
