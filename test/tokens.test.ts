// Issue 32: token rate limits reserved at admission and settled after the run, with their headers on every /v1
// answer (errors included), on the real server with stories260K, in memory and with Redis.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { modelsDir, startServer, type TestServer } from "../harness/server.ts";
import { redisTestUrl } from "../harness/keys.ts";
import { waitFor } from "./helpers/wait-for.ts";

const stories = { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 512, parallel: 2, threads: 1 };
// An upstream nobody listens on, whose prompts are not counted (`tokenize: none`): the reservation is an estimate.
const dead = { id: "dead", engine: "upstream", capabilities: ["chat"], upstreams: [{ url: "http://127.0.0.1:9/v1", model: "m" }], tokenize: "none", contextSize: 1024 };
const plans = {
  metered: { tokenLimit: { tokens: 300, window: "1h" } },
  pooled: { tokenLimit: { tokens: 10_000, window: "1h" }, accountTokenLimit: { tokens: 400, window: "1h" } },
};

const tokenHeaders = (res: Response) => ({
  limit: res.headers.get("x-ratelimit-limit-tokens"),
  remaining: res.headers.get("x-ratelimit-remaining-tokens"),
  reset: res.headers.get("x-ratelimit-reset-tokens"),
});

for (const redis of [false, true]) {
  describe(`issue 32 token limits (${redis ? "Redis" : "memory"})`, () => {
    let s: TestServer;
    before(async () => {
      s = await startServer({ models: [stories, dead], plans, ...(redis ? { redis: { url: redisTestUrl } } : {}) });
    });
    after(() => s?.close());

    const remaining = async (key: string) => Number(tokenHeaders(await s.get("/v1/models", { key })).remaining);

    test("every /v1 answer carries the token headers, errors included; a plan without token limits has none", async () => {
      const { key } = await s.createKey({ plan: "metered" });
      const models = await s.get("/v1/models", { key });
      assert.equal(models.status, 200);
      assert.deepEqual(tokenHeaders(models), { limit: "300", remaining: "300", reset: "1h0m0s" });
      const unknown = await s.post("/v1/chat/completions", { model: "nope", messages: [{ role: "user", content: "hi" }] }, { key });
      assert.equal(unknown.status, 404);
      assert.equal(tokenHeaders(unknown).limit, "300");
      const invalid = await s.post("/v1/chat/completions", { model: "stories", messages: "x" }, { key });
      assert.equal(invalid.status, 400);
      assert.equal(tokenHeaders(invalid).remaining, "300");
      const missingPath = await s.get("/v1/nothing-here", { key });
      assert.equal(missingPath.status, 404);
      assert.equal(tokenHeaders(missingPath).limit, "300");
      const plain = await s.createKey();
      assert.equal(tokenHeaders(await s.get("/v1/models", { key: plain.key })).limit, null);
    });

    test("a request reserves prompt + max_tokens, is settled to its usage, and one that does not fit is 429 with Retry-After at the reset", async () => {
      const { key } = await s.createKey({ plan: "metered" });
      const res = await s.post("/v1/chat/completions", { model: "stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 20 }, { key });
      assert.equal(res.status, 200);
      const body = (await res.json()) as { usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } };
      // The answer's headers show the reservation (prompt + the cap of 20); the window is then settled to the usage.
      assert.equal(Number(res.headers.get("x-ratelimit-remaining-tokens")), 300 - body.usage.prompt_tokens - 20);
      assert.equal(await remaining(key), 300 - body.usage.total_tokens);
      const left = 300 - body.usage.total_tokens;
      const refused = await s.post("/v1/chat/completions", { model: "stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: left }, { key });
      assert.equal(refused.status, 429);
      const error = ((await refused.json()) as { error: { code: string; message: string } }).error;
      assert.equal(error.code, "rate_limit_exceeded");
      assert.match(error.message, /Rate limit of 300 tokens per 1h0m0s for this key exceeded: this request reserves \d+ tokens/);
      const retryAfter = Number(refused.headers.get("retry-after"));
      assert.ok(retryAfter > 3500 && retryAfter <= 3600, `Retry-After ${retryAfter} is when the window resets`);
      assert.deepEqual(tokenHeaders(refused), { limit: "300", remaining: String(left), reset: tokenHeaders(refused).reset });
      assert.equal(await remaining(key), left, "the refused request reserved nothing");
      // Without max_tokens the cap is the plan's maxOutputTokens or what the context leaves: 512 - prompt > what is left.
      const uncapped = await s.post("/v1/chat/completions", { model: "stories", messages: [{ role: "user", content: "Once upon a time" }] }, { key });
      assert.equal(uncapped.status, 429);
    });

    test("the account's window counts all its keys together", async () => {
      const first = await s.createKey({ plan: "pooled" });
      const second = await s.createKey({ account: first.accountId });
      const ok = await s.post("/v1/chat/completions", { model: "stories", messages: [{ role: "user", content: "Once" }], max_tokens: 200 }, { key: first.key });
      assert.equal(ok.status, 200);
      const used = ((await ok.json()) as { usage: { total_tokens: number } }).usage.total_tokens;
      assert.equal(await remaining(second.key), 400 - used, "the second key's headers show the account's window, the most constraining");
      const refused = await s.post("/v1/chat/completions", { model: "stories", messages: [{ role: "user", content: "Once" }], max_tokens: 400 }, { key: second.key });
      assert.equal(refused.status, 429);
      assert.match(((await refused.json()) as { error: { message: string } }).error.message, /for this account exceeded/);
    });

    test("a streamed request cut by the client is settled to what was generated", async () => {
      const { key, id } = await s.createKey({ plan: "metered" });
      const controller = new AbortController();
      const res = await s.post("/v1/chat/completions", { model: "stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 250, stream: true }, { key, signal: controller.signal });
      assert.equal(res.status, 200);
      const reader = res.body!.getReader();
      await reader.read();
      await reader.read();
      controller.abort();
      await s.server.ctx.usage.flush();
      const recorded = await waitFor(
        async () => {
          await s.server.ctx.usage.flush();
          const { openStore } = await import("../src/store/store.ts");
          const { silentLogger } = await import("../harness/keys.ts");
          const store = await openStore(s.config, silentLogger());
          try {
            return (await store.usage.summary()).find((r) => r.keyId === id) ?? null;
          } finally {
            await store.close();
          }
        },
        (row) => row !== null,
        "the cut stream's usage to be recorded",
      );
      const used = recorded!.promptTokens + recorded!.completionTokens;
      assert.ok(recorded!.completionTokens < 250, `the stream was cut (${recorded!.completionTokens} tokens generated)`);
      assert.equal(await remaining(key), 300 - used, "settled to the prompt and the tokens generated, not the 250 reserved");
    });

    test("a request that fails before generating is settled to 0 (an upstream that does not answer; its prompt estimated)", async () => {
      const { key } = await s.createKey({ plan: "metered" });
      const res = await s.post("/v1/chat/completions", { model: "dead", messages: [{ role: "user", content: "x".repeat(400) }], max_tokens: 100 }, { key });
      assert.ok(res.status >= 500, `status ${res.status}`);
      // The reservation (about 100 prompt tokens estimated + 100) was on the answer, then given back in full.
      assert.equal(Number(res.headers.get("x-ratelimit-remaining-tokens")), 300 - 100 - 100);
      assert.equal(await remaining(key), 300);
    });
  });
}

test("issue 32 OpenAPI documents the token headers (and the request ones) on every /v1 response, Retry-After on 429", async () => {
  const s = await startServer({ models: [] });
  try {
    const { key } = await s.createKey();
    const doc = (await (await s.get("/v1/openapi.json", { key })).json()) as { paths: Record<string, Record<string, { responses: Record<string, { headers?: Record<string, unknown> }> }>> };
    const chat = doc.paths["/v1/chat/completions"].post.responses;
    for (const status of ["200", "400", "429", "503"]) {
      assert.ok(chat[status].headers?.["x-ratelimit-remaining-tokens"], `${status} documents x-ratelimit-remaining-tokens`);
      assert.ok(chat[status].headers?.["x-ratelimit-reset-requests"]);
    }
    assert.ok(chat["429"].headers?.["retry-after"]);
    assert.ok(doc.paths["/v1/models"].get.responses["200"].headers?.["x-ratelimit-limit-tokens"]);
  } finally {
    await s.close();
  }
});
