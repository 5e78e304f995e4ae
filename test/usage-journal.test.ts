import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { modelsDir, requester, spawnServer, tempDir, trustingFetch } from "../harness/server.ts";
import { createKey, silentLogger } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { openStore } from "../src/store/store.ts";
import { UsageRecorder } from "../src/store/usage-recorder.ts";
import { createAccount, createKey as createKeyRecord } from "../src/keys/lifecycle.ts";
import { waitFor } from "./helpers/wait-for.ts";

/**
 * Issue 47: the usage recorder flushes every 2 s; a replica killed with -9 in between lost what it had summed. Each
 * event is now journaled in the data dir as it is recorded, and the next server on that dir writes what is left.
 */
test("issue 47 kill -9 right after the answers loses no usage: the next start writes the journal", async () => {
  const dir = tempDir();
  const raw = { dataDir: path.join(dir, "data"), logLevel: "warn", models: [{ id: "embed", engine: "llama", source: path.join(modelsDir, "forged/bert-embed-tiny.gguf"), capabilities: ["embeddings"], threads: 1 }] };
  const config = testConfig(raw, null);
  const { key, id } = await createKey(config);
  let server = await spawnServer(raw, dir);
  try {
    const { fetch, agent } = trustingFetch(readFileSync(path.join(dir, "data/tls/cert.pem"), "utf8"));
    let tokens = 0;
    for (let i = 0; i < 8; i++) {
      const res = await requester(fetch, server.origin).post("/v1/embeddings", { model: "embed", input: `A cat and a dog play in the park ${i}` }, { key });
      tokens += ((await res.json()) as { usage: { prompt_tokens: number } }).usage.prompt_tokens;
    }
    // Within the 2 s between two flushes: the sums are only in the process and its journal.
    await server.stop("SIGKILL");
    server = await spawnServer(raw, dir);
    const store = await openStore(config, silentLogger());
    try {
      const usage = () => store.db.selectFrom("usage").select(["requests", "prompt_tokens"]).where("key_id", "=", id).execute();
      const rows = await waitFor(usage, (r) => r.length > 0 && Number(r[0]!.requests) >= 8, "the killed process's usage", 5_000, 100).catch(usage);
      assert.deepEqual(rows.map((r) => [Number(r.requests), Number(r.prompt_tokens)]), [[8, tokens]]);
    } finally {
      await store.close();
      await agent.close();
    }
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("issue 47 the journal of a process that is gone: an unsent segment is written, a batch the database has already counts once", async () => {
  const dir = tempDir();
  const config = testConfig({ dataDir: dir, models: [] }, null);
  const store = await openStore(config, silentLogger());
  try {
    const account = await createAccount(store, config, { name: "journal" }, { actor: "cli" });
    const key = await createKeyRecord(store, { account: account.id }, { actor: "cli" });
    const journalDir = path.join(dir, "usage-journal");
    mkdirSync(journalDir);
    const event = (promptTokens: number) => JSON.stringify({ keyId: key.id, accountId: account.id, model: "m", endpoint: "chat", day: "2026-01-02", promptTokens, completionTokens: 1 }) + "\n";
    // A pid that cannot be running (above Linux's pid_max).
    const gone = 4_194_999;
    writeFileSync(path.join(journalDir, `open-${gone}-a.jsonl`), event(10) + event(20));
    writeFileSync(path.join(journalDir, `batch-${gone}-written.jsonl`), event(100));
    // The killed process had written that batch before it could remove its file.
    await store.usage.add("written", [{ keyId: key.id, accountId: account.id, model: "m", endpoint: "chat", day: "2026-01-02", requests: 1, promptTokens: 100, completionTokens: 1 }]);

    const recorder = new UsageRecorder(store, silentLogger(), journalDir);
    await recorder.flush();
    const rows = await store.usage.summary(account.id);
    assert.deepEqual(rows.map((r) => [r.requests, r.promptTokens, r.completionTokens]), [[3, 130, 3]]);
    await recorder.close();
    assert.deepEqual(readdirSync(journalDir), [], "nothing is left to write");
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
