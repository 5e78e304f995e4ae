import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { testConfig } from "./helpers/config.ts";
import { modelsDir, requester, spawnServer, tempDir, trustingFetch } from "./helpers/server.ts";
import { createKey } from "./helpers/keys.ts";
import { sseFrames } from "./helpers/sse.ts";
import { until } from "./helpers/wait-for.ts";

test("issue 3.12 SIGTERM stops accepting, drains an in-flight stream to [DONE], then exits 0", async () => {
  const dir = tempDir();
  const raw = {
    dataDir: path.join(dir, "data"),
    server: { shutdownTimeout: "30s" },
    models: [{ id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 2048, parallel: 1, threads: 1 }],
  };
  const server = await spawnServer(raw, dir);
  const { key } = await createKey(testConfig(raw, path.join(dir, "c.yaml")), {});
  const { fetch } = trustingFetch(readFileSync(path.join(dir, "data/tls/cert.pem"), "utf8"));
  const res = await requester(fetch, server.origin).post(
    "/v1/chat/completions",
    { model: "stories", stream: true, max_tokens: 1500, temperature: 1, seed: 1, messages: [{ role: "user", content: "Once upon a time" }] },
    { key },
  );
  assert.equal(res.status, 200);
  const frames = sseFrames(res);
  assert.ok(!(await frames.next()).done, "the stream has begun");
  const exited = server.stop("SIGTERM");
  const ca = readFileSync(path.join(dir, "data/tls/cert.pem"), "utf8");
  const freshConnection = async () => {
    const fresh = trustingFetch(ca);
    try {
      await (await fresh.fetch(`${server.origin}/healthz`)).arrayBuffer();
    } finally {
      await fresh.agent.close();
    }
  };
  await until(() => freshConnection().then(() => false, () => true), "the listener to close", 5000);
  await assert.rejects(freshConnection(), "no new connections while draining");
  let last: unknown = null;
  for await (const frame of frames) last = frame;
  assert.equal(last, "[DONE]", "the stream in flight finished normally");
  assert.equal(await exited, 0);
});
