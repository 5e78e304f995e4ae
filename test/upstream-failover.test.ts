// test: long (80 s alone, 31 s of it CPU)
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { testConfig } from "../harness/config.ts";
import { createKey } from "../harness/keys.ts";
import { modelsDir, spawnServer, startServer, tempDir, trustingFetch, type SpawnedServer, type TestServer } from "../harness/server.ts";
import { shapedModel } from "../harness/shaped-model.ts";
import { parseSse } from "./helpers/sse.ts";

/**
 * Failover under load: three real Modelgate nodes (separate processes) as one pool; one is killed with SIGKILL
 * while it provably has requests in flight. Non-stream requests are retried elsewhere (nothing was committed to
 * the client), so none fails; streams already running on the killed node end with one error event.
 */
interface Node {
  server: SpawnedServer;
  key: string;
  ca: string;
}

const adminToken = "RuTuHAR8doLpVwZaNcVuy51WFpabH_9w3KHSs1OJ-Ow";
const nodeAdminToken = "pQ7vXk2mZr9LwT4yBn6HcJ8sFd3GaU1eKo5iVx0tYq";
let nodes: Node[] = [];
let front: TestServer;
let key: string;

before(async () => {
  nodes = await Promise.all(
    [0, 1, 2].map(async () => {
      const dir = tempDir("failover-node-");
      const raw = {
        dataDir: dir,
        adminToken: nodeAdminToken,
        models: [
          { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, parallel: 4, threads: 1 },
          { id: "shaped", engine: "llama", source: shapedModel(), capabilities: ["chat"], contextSize: 512, parallel: 2, threads: 1 },
        ],
      };
      const server = await spawnServer(raw, dir);
      const { key: nodeKey } = await createKey(testConfig(raw, path.join(dir, "config.yaml")));
      return { server, key: nodeKey, ca: path.join(dir, "tls/cert.pem") };
    }),
  );
  const fleet = (model: string) => ({
    engine: "upstream",
    protocol: "modelgate",
    capabilities: ["chat"],
    upstreams: nodes.map((n) => ({ url: `${n.server.origin}/v1`, apiKey: n.key, model, ca: n.ca, maxInFlight: 8 })),
    health: { interval: "500ms" },
    breaker: { failures: 2, cooldown: "30s" },
  });
  front = await startServer({
    adminToken,
    models: [{ id: "fleet", ...fleet("stories") }, { id: "fleet-long", ...fleet("shaped") }, { id: "fleet-affine", ...fleet("stories"), routing: "prefix-affinity" }],
  });
  key = (await front.createKey()).key;
});

after(async () => {
  await front?.close();
  await Promise.all(nodes.map((n) => n.server.stop("SIGKILL")));
});

const upstreams = async (model: string) => {
  const res = await front.get(`/admin/v1/models/${model}`, { key: adminToken });
  return ((await res.json()) as { upstreams: { url: string; state: string; inFlight: number }[] }).upstreams;
};

test("prefix-affinity over Modelgate nodes: a conversation's turns reach one node, whose llama engine finds the history cached", async () => {
  const cacheOf = async (n: Node) => {
    const { fetch: tlsFetch, agent } = trustingFetch(readFileSync(n.ca, "utf8"));
    try {
      const res = await tlsFetch(`${n.server.origin}/admin/v1/models/stories`, { headers: { authorization: `Bearer ${nodeAdminToken}` } });
      return ((await res.json()) as { promptCache?: { promptTokens: number; reusedTokens: number } }).promptCache ?? { promptTokens: 0, reusedTokens: 0 };
    } finally {
      await agent.close();
    }
  };
  const conversations = [0, 1, 2, 3].map((n) => ({
    // No shared system prompt: the node's llama engine would trade one conversation's sequence for a few shared tokens.
    messages: [{ role: "user" as const, content: `${["Lily", "Tom", "Ben", "Sue"][n]} went to the sea with a ${["girl", "dog", "king", "bird"][n]} one day.` }],
    node: -1,
    promptTokens: 0,
  }));
  for (let round = 0; round < 3; round++) {
    for (const c of conversations) {
      const before = await Promise.all(nodes.map(cacheOf));
      const res = await front.openai(key).chat.completions.create({ model: "fleet-affine", messages: c.messages, max_tokens: 8, temperature: 0 });
      const after = await Promise.all(nodes.map(cacheOf));
      const node = after.findIndex((a, i) => a.promptTokens > before[i].promptTokens);
      if (round === 0) c.node = node;
      assert.equal(node, c.node, "every turn on the conversation's node");
      const reused = after[node].reusedTokens - before[node].reusedTokens;
      if (round > 0) assert.ok(reused >= c.promptTokens, `turn ${round + 1}: ${reused} tokens reused, the previous prompt had ${c.promptTokens}`);
      c.promptTokens = res.usage!.prompt_tokens;
      c.messages.push({ role: "assistant", content: res.choices[0].message.content! } as never, { role: "user", content: `And then, part ${round + 2}?` });
    }
  }
});

test("kill -9 of one of three upstreams under load: 0 failed requests; its running streams end with one error event", async () => {
  // Streams first, one per node (least outstanding spreads them), each past its first token.
  const streams = await Promise.all(
    [0, 1, 2].map(async () => {
      const res = await front.post("/v1/chat/completions", { model: "fleet-long", messages: [{ role: "user", content: "Once" }], max_tokens: 150, stream: true }, { key });
      assert.equal(res.status, 200);
      return res;
    }),
  );
  const streamBodies = streams.map((res) => res.text());

  const victim = 1;
  const victimUrl = `${nodes[victim].server.origin}/v1`;
  const statuses: number[] = [];
  let next = 0;
  let killedWithInFlight = -1;
  const worker = async () => {
    while (next < 500) {
      next++;
      const res = await front.post("/v1/chat/completions", { model: "fleet", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 32 }, { key });
      await res.arrayBuffer();
      statuses.push(res.status);
    }
  };
  const killer = (async () => {
    while (statuses.length < 100) await new Promise((r) => setTimeout(r, 5));
    for (;;) {
      const inFlight = (await upstreams("fleet")).find((u) => u.url === victimUrl)!.inFlight;
      if (inFlight >= 1) {
        nodes[victim].server.child.kill("SIGKILL");
        killedWithInFlight = inFlight;
        return;
      }
    }
  })();
  await Promise.all([...Array.from({ length: 16 }, worker), killer]);

  assert.ok(killedWithInFlight >= 1, "the node was killed with requests in flight");
  assert.equal(statuses.length, 500);
  assert.deepEqual([...new Set(statuses)], [200], `statuses: ${JSON.stringify(Object.fromEntries([...new Set(statuses)].map((s) => [s, statuses.filter((x) => x === s).length])))}`);
  const victimState = (await upstreams("fleet")).find((u) => u.url === victimUrl)!.state;
  assert.equal(victimState, "ejected");

  const ended = await Promise.race([Promise.all(streamBodies), new Promise<null>((r) => setTimeout(() => r(null), 60_000))]);
  assert.ok(ended, "no stream hangs");
  const outcomes = ended.map((raw) => {
    const body = parseSse(raw);
    const errors = body.events.filter((e) => e.error);
    return body.done ? "done" : errors.length === 1 && body.events.at(-1).error ? `error:${errors[0].error.code}` : "broken";
  });
  assert.ok(!outcomes.includes("broken"), outcomes.join(","));
  assert.ok(outcomes.includes("error:overloaded"), `the stream on the killed node ended with an error event: ${outcomes.join(",")}`);
});
