import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import OpenAI, { toFile } from "openai";
import { startServer, modelsDir } from "../harness/server.ts";
test("§8 a client still writing a large body reads the 413 (no connection reset): uploads and JSON, through the openai client", async () => {
  const srv = await startServer({ plans: { small: { maxUploadBytes: 1_000_000, maxBodyBytes: 1_000_000 } }, models: [{ id: "w", engine: "onnx", source: path.join(modelsDir, "forged/whisper-scripted"), capabilities: ["transcriptions"], load: "lazy" }] });
  const { key } = await srv.createKey({ plan: "small" });
  for (const size of [2_000_000, 20_000_000]) {
    const err = await srv.openai(key).audio.transcriptions.create({ model: "w", file: await toFile(Buffer.alloc(size), "a.wav") }).catch((e) => e);
    assert.ok(err instanceof OpenAI.APIError, String(err));
    assert.equal(err.status, 413, String(err));
  }
  const big = await srv.openai(key).embeddings.create({ model: "w", input: "x".repeat(30_000_000) }).catch((e) => e);
  assert.equal(big.status, 413, String(big));
  await srv.close();
});
