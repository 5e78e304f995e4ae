import { test } from "node:test";
import assert from "node:assert/strict";
import { startServer } from "../harness/server.ts";
import { startPacedUpstream } from "../harness/paced-upstream.mjs";
import { usageRows } from "./helpers/usage.ts";
import { waitFor } from "./helpers/wait-for.ts";

/**
 * Issue 42.2: a request whose client leaves before its first token was given to the engine, so its prompt is
 * charged (usage, the token meter's settle), not handed back whole. The model is an upstream that answers only after
 * seconds (streamed: its first word after 500 ms), so the client leaves, counted, while the request runs: once the
 * model's slot is taken, before anything was generated. The upstream is not asked to count prompts (`tokenize:
 * none`), so the prompt charged is the reservation's estimate, a token per 4 characters (features/inference.ts).
 */
test("issue 42.2: a client that leaves before the first token is charged its prompt, streamed or not", async () => {
  const paced = await startPacedUpstream({ durationMs: 8000 });
  const srv = await startServer({ models: [{ id: "paced", engine: "upstream", capabilities: ["chat"], parallel: 2, upstreams: [{ url: `http://127.0.0.1:${paced.port}/v1`, model: "paced" }] }] });
  const active = () => srv.server.ctx.catalog.get("paced").stats().active;
  try {
    const content = "Once upon a time there was a cat who liked the sea";
    for (const stream of [false, true]) {
      const { key, id, accountId } = await srv.createKey();
      const client = new AbortController();
      const answer = srv.post("/v1/chat/completions", { model: "paced", messages: [{ role: "user", content }], max_tokens: 16, stream }, { key, signal: client.signal }).catch((err: Error) => err);
      await waitFor(active, (n) => n === 1, "the request to hold the model's slot", 10_000, 10);
      client.abort();
      assert.equal(((await answer) as Error).name, "AbortError", "the client left before any answer");
      await waitFor(active, (n) => n === 0, "the slot to be free again", 10_000, 10);
      const rows = await waitFor(() => usageRows(srv.server, srv.config, accountId, id), (r) => r.length > 0, "the usage row", 5000, 50);
      assert.deepEqual(rows, [["paced", "chat", 1, Math.ceil(content.length / 4), 0]], `stream: ${stream}`);
    }
  } finally {
    await srv.close();
    paced.server.closeAllConnections();
    paced.server.close();
  }
});
