import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { distIsFresh } from "../harness/dist-freshness.mjs";
import { modelsDir, repoRoot, requester, runCli, spawnServer, tempDir, trustingFetch, type SpawnedServer } from "../harness/server.ts";

/**
 * `npm start` runs the compiled build (dist/), not the sources through tsx. This runs the real CLI and server from
 * a build of the sources made the same way (`tsconfig.build.json`): a llama chat and an ONNX embedding, whose worker
 * threads must start from compiled files too. The build is dist/ itself when it is newer than every source (npm test
 * builds it first, and npm ci builds it); otherwise this builds one into a scratch folder inside the repo (so
 * packages resolve), leaving dist/ as it is.
 */
const fresh = distIsFresh(repoRoot);
const outDir = fresh ? path.join(repoRoot, "dist") : path.join(repoRoot, ".cache", `build-test-${process.pid}`);
const entry = path.join(outDir, "cli", "run.js");
const dir = tempDir();
let server: SpawnedServer | null = null;

before(async () => {
  if (fresh) return;
  const tsc = path.join(repoRoot, "node_modules", "typescript", "bin", "tsc");
  await promisify(execFile)(process.execPath, [tsc, "-p", path.join(repoRoot, "tsconfig.build.json"), "--outDir", outDir], { cwd: repoRoot });
});

after(async () => {
  await server?.stop();
  if (!fresh) rmSync(outDir, { recursive: true, force: true });
  rmSync(dir, { recursive: true, force: true });
});

test("the compiled build serves chat (llama) and embeddings (ONNX workers) with keys made by its CLI", async () => {
  const config = {
    dataDir: path.join(dir, "data"),
    logLevel: "warn",
    models: [
      { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 512, parallel: 1, threads: 1 },
      { id: "embed-onnx", engine: "onnx", source: path.join(modelsDir, "forged/bert-embed-tiny"), capabilities: ["embeddings"], threads: 1 },
    ],
  };
  const configFile = path.join(dir, "config.json");
  writeFileSync(configFile, JSON.stringify(config));
  const account = await runCli(["accounts", "create", "acme", "--config", configFile, "--json"], {}, entry);
  assert.equal(account.code, 0, account.stderr);
  const created = await runCli(["keys", "create", "--account", "acme", "--config", configFile, "--json"], {}, entry);
  assert.equal(created.code, 0, created.stderr);
  const { key } = JSON.parse(created.stdout) as { key: string };

  server = await spawnServer(config, dir, [], {}, entry);
  const ca = readFileSync(path.join(dir, "data", "tls", "cert.pem"), "utf8");
  const { fetch, agent } = trustingFetch(ca);
  try {
    const { post } = requester(fetch, server.origin);
    const chat = await post("/v1/chat/completions", { model: "stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 8, temperature: 0 }, { key });
    assert.equal(chat.status, 200);
    const completion = (await chat.json()) as { usage: { completion_tokens: number } };
    assert.equal(completion.usage.completion_tokens, 8);

    const embed = await post("/v1/embeddings", { model: "embed-onnx", input: ["a cat", "a dog"] }, { key });
    assert.equal(embed.status, 200);
    const list = (await embed.json()) as { data: { embedding: number[] }[] };
    assert.deepEqual(list.data.map((d) => d.embedding.length), [128, 128]);
  } finally {
    await agent.close();
  }
});
