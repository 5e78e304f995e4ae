// test: long (38 s alone, 28 s of it CPU)
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync, rmSync } from "node:fs";
import path from "node:path";
import OpenAI, { toFile } from "openai";
import { modelsDir, spawnServer, tempDir, trustingFetch, type SpawnedServer } from "../harness/server.ts";
import { createKey, freshPostgres, silentLogger } from "../harness/keys.ts";
import { testConfig } from "../harness/config.ts";
import { openStore, type Store } from "../src/store/store.ts";
import { waitFor } from "./helpers/wait-for.ts";

/**
 * Issue 36, durability: a node killed with -9 mid-batch resumes after a restart, and with two replicas on
 * PostgreSQL the survivor takes the batch over when its lease expires. Every line is in the output exactly once, the
 * lines written before the kill keep their results (they are not run again: the prompt tokens the finishing node
 * counts are exactly those of the lines it wrote), and none is lost. Each line is charged exactly once in the usage
 * table (issue 47: its usage is written with its result).
 */
const metricsToken = "Qm3vT8xLp2Rk7sWz5nYc1bHf4jDg6aEu9oKi0tNq";
const lineCount = 40;

function input(): string {
  return Array.from({ length: lineCount }, (_, i) =>
    JSON.stringify({
      custom_id: `line-${i + 1}`,
      method: "POST",
      url: "/v1/chat/completions",
      body: { model: "stories-chat", messages: [{ role: "user", content: `Once upon a time there was a cat number ${i}` }], max_tokens: 48, temperature: 0 },
    }),
  ).join("\n");
}

type OutputLine = { id: string; custom_id: string; response: { status_code: number; body: { usage: { prompt_tokens: number } } } };

async function promptTokensCounted(fetch: (u: string, i?: RequestInit) => Promise<Response>, origin: string): Promise<number> {
  const text = await (await fetch(`${origin}/metrics`, { headers: { authorization: `Bearer ${metricsToken}` } })).text();
  const line = text.split("\n").find((l) => l.startsWith('modelgate_prompt_tokens_total{model="stories-chat"'));
  return line ? Number(line.split(" ").at(-1)) : 0;
}

/**
 * The lines done so far and their result ids, read from the store. Retried: on this loaded machine the test's own
 * pool sometimes misses its 1 s connection timeout, which says nothing about the servers.
 */
async function doneLines(store: Store, batchId: string): Promise<Map<string, string>> {
  for (let attempt = 1; ; attempt++) {
    try {
      const rows = await store.db.selectFrom("batch_lines").select(["custom_id", "result"]).where("batch_id", "=", batchId).where("state", "=", "done").execute();
      return new Map(rows.map((r) => [r.custom_id, (JSON.parse(r.result!) as OutputLine).id]));
    } catch (err) {
      if (attempt >= 5) throw err;
    }
  }
}

async function scenario(dialect: "sqlite" | "postgres", replicas: 1 | 2): Promise<void> {
  const dir = tempDir("modelgate-batches-");
  const db = dialect === "postgres" ? await freshPostgres() : null;
  const raw = {
    dataDir: dir,
    logLevel: "warn",
    metrics: { token: metricsToken },
    keySecret: `batches-${randomBytes(8).toString("hex")}`,
    batches: { leaseTtl: "2s", pollInterval: "200ms" },
    models: [{ id: "stories-chat", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, threads: 1, parallel: 2 }],
    ...(db ? { database: { url: db.url } } : {}),
  };
  const nodes: SpawnedServer[] = [];
  const store = await openStore(testConfig(raw, null), silentLogger());
  try {
    nodes.push(await spawnServer(raw, dir));
    if (replicas === 2) nodes.push(await spawnServer(raw, dir));
    const { fetch, agent } = trustingFetch(readFileSync(path.join(dir, "tls", "cert.pem"), "utf8"));
    const client = (origin: string) => new OpenAI({ apiKey: key.key, baseURL: `${origin}/v1`, maxRetries: 0, fetchOptions: { dispatcher: agent } as never });
    const key = await createKey(testConfig(raw, null));
    const first = client(nodes[0].origin);
    const file = await first.files.create({ file: await toFile(Buffer.from(input()), "input.jsonl"), purpose: "batch" });
    const batch = await first.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });

    // Kill the node holding the lease once a few lines are written.
    await waitFor(() => doneLines(store, batch.id), (d) => d.size >= 3, "three lines written", 60_000, 20);
    const lease = await waitFor(
      () => store.db.selectFrom("batches").select("lease_owner").where("id", "=", batch.id).executeTakeFirstOrThrow().catch(() => null),
      (row) => row !== null,
      "the lease row",
    );
    const holder = nodes.find((n) => lease!.lease_owner?.includes(`:${n.child.pid}:`));
    assert.ok(holder, `a node holds the lease (${lease!.lease_owner})`);
    // What the survivor has counted before it can take the batch over: a restarted node counts from zero, and the
    // other replica is read now, not once the lease has expired and it may have run a line already.
    const standby = replicas === 2 ? nodes.find((n) => n !== holder)! : null;
    const tokensAtStart = standby ? await promptTokensCounted(fetch, standby.origin) : 0;
    await holder.stop("SIGKILL");
    const before = await doneLines(store, batch.id);
    assert.ok(before.size < lineCount, `killed mid-batch (${before.size} of ${lineCount} written)`);

    // One replica: restart it on the same store. Two: the other one finishes the batch.
    const survivor = standby ?? (await spawnServer(raw, dir));
    if (!standby) nodes.push(survivor);
    const other = client(survivor.origin);
    const done = await waitFor(() => other.batches.retrieve(batch.id), (b) => b.status === "completed", "the batch to complete after the kill", 120_000, 100);
    const errors = done.error_file_id ? await (await other.files.content(done.error_file_id)).text() : "";
    const logged = nodes.flatMap((n) => n.stderr.join("").split("\n")).filter((l) => /"level":(50|60)/.test(l));
    assert.deepEqual(done.request_counts, { total: lineCount, completed: lineCount, failed: 0 }, `the error file:\n${errors}\nthe errors logged:\n${logged.join("\n")}`);
    const out = (await (await other.files.content(done.output_file_id!)).text()).trim().split("\n").map((l) => JSON.parse(l) as OutputLine);
    assert.deepEqual(out.map((l) => l.custom_id), Array.from({ length: lineCount }, (_, i) => `line-${i + 1}`), "every line once, in order");
    for (const line of out) assert.equal(line.response.status_code, 200);
    for (const [customId, id] of before) assert.equal(out.find((l) => l.custom_id === customId)!.id, id, `${customId} kept the result written before the kill`);
    // The lines the survivor ran are exactly those not written before the kill (a line run twice would count twice).
    const expected = out.filter((l) => !before.has(l.custom_id)).reduce((n, l) => n + l.response.body.usage.prompt_tokens, 0);
    assert.equal((await promptTokensCounted(fetch, survivor.origin)) - tokensAtStart, expected, "prompt tokens of the lines run after the kill");
    // Issue 47: each line is charged with its result, in one transaction: the lines written before the kill are
    // charged though the node died (nothing waited in its usage buffer), the others once, by the node that ran them.
    const charged = out.reduce((n, l) => n + l.response.body.usage.prompt_tokens, 0);
    const usageOf = () => store.db.selectFrom("usage").select(["batch_requests", "batch_prompt_tokens"]).where("key_id", "=", key.id).execute().catch(() => []);
    const rows = await waitFor(usageOf, (r) => r.reduce((n, x) => n + Number(x.batch_requests), 0) >= lineCount, "the batch's usage", 5_000, 100).catch(() => usageOf());
    assert.deepEqual(
      { requests: rows.reduce((n, x) => n + Number(x.batch_requests), 0), promptTokens: rows.reduce((n, x) => n + Number(x.batch_prompt_tokens), 0) },
      { requests: lineCount, promptTokens: charged },
      "the usage table charges every line once",
    );
    await agent.close();
  } finally {
    // A node killed already has no exit to wait for (stop() waits for one unless exitCode is set).
    for (const node of nodes) if (node.child.signalCode === null) await node.stop("SIGKILL");
    await store.close();
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

for (const dialect of ["sqlite", "postgres"] as const) {
  test(`issue 36 (${dialect}): kill -9 mid-batch, restart: every line exactly once in the output`, () => scenario(dialect, 1));
}

test("issue 36 (postgres): two replicas, the one working the batch is killed, the other takes its lease over and finishes", () => scenario("postgres", 2));
