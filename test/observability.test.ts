import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { Writable } from "node:stream";
import { after, before, test } from "node:test";
import parsePrometheus from "parse-prometheus-text-format";
import { errorOf } from "./helpers/errors.ts";
import { startCanned, type Peer } from "../harness/peers.ts";
import { modelsDir, repoRoot, startServer, type TestServer } from "../harness/server.ts";
import { readSse, sseFrames } from "./helpers/sse.ts";
import { until, waitFor } from "./helpers/wait-for.ts";

/** Issue 19: GET /metrics after real traffic (parsed with a Prometheus text-format parser), and the access log. */
interface Family {
  name: string;
  type: string;
  metrics: { labels?: Record<string, string>; value?: string; count?: string; sum?: string; buckets?: Record<string, string> }[];
}

const adminToken = "Cm7bl9GpZC2uPH8-wvJG2fUhOz3LvPjxl5TakpfcoQI";
const metricsToken = "FggZlX1zw4yu1zlj6V-0OA_oLxGAXh9poFoVLbsiMbE";
const lines: Record<string, unknown>[] = [];
let srv: TestServer;
let key: string;
let keyId: string;
let canned: Peer;

before(async () => {
  canned = await startCanned();
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  srv = await startServer(
    {
      adminToken,
      metrics: { token: metricsToken },
      plans: { three: { rateLimit: { requests: 3, window: "1m" } }, small: { maxBodyBytes: 2000 } },
      models: [
        { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, parallel: 2, threads: 1 },
        { id: "single", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, parallel: 1, queueSize: 0, threads: 1 },
        { id: "bert-embed", engine: "llama", source: path.join(modelsDir, "forged/bert-embed-tiny.gguf"), capabilities: ["embeddings"], threads: 1 },
        { id: "canned", engine: "upstream", capabilities: ["chat"], upstreams: [{ url: `http://127.0.0.1:${canned.port}/v1`, model: "canned" }] },
      ],
    },
    { logger: { level: "info", stream } },
  );
  ({ key, id: keyId } = await srv.createKey());
});

after(async () => {
  await srv?.close();
  canned?.child.kill();
});

interface Scrape {
  families: Map<string, Family>;
  text: string;
}

/** Scrapes /metrics and parses it (the parser throws on any line that is not valid text format). */
async function scrape(token = adminToken): Promise<Scrape & Map<string, Family>> {
  const res = await srv.get("/metrics", { key: token });
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  const families = new Map((parsePrometheus(text) as Family[]).map((f) => [f.name, f]));
  return Object.assign(families, { families, text });
}

const sameLabels = (a: Record<string, string>, b: Record<string, string>) => Object.keys(a).length === Object.keys(b).length && Object.entries(b).every(([k, v]) => a[k] === v);

/**
 * The value of a counter or gauge sample with exactly these labels, or a histogram's observation count (0 when
 * absent). parse-prometheus-text-format 1.1 flattens labelled histograms and drops their labels, so a histogram's
 * count is read from its `_count` line of the same, parser-validated text.
 */
function value(scraped: Scrape, name: string, labels: Record<string, string>): number {
  const family = scraped.families.get(name);
  if (family?.type === "HISTOGRAM") {
    for (const line of scraped.text.split("\n")) {
      const match = new RegExp(`^${name}_count\\{(.*)\\} (\\S+)$`).exec(line);
      if (!match) continue;
      const lineLabels = Object.fromEntries([...match[1].matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
      if (sameLabels(lineLabels, labels)) return Number(match[2]);
    }
    return 0;
  }
  const sample = family?.metrics.find((m) => sameLabels(m.labels ?? {}, labels));
  return sample ? Number(sample.value) : 0;
}

const chat = (model: string, extra: Record<string, unknown> = {}, k = key) =>
  srv.post("/v1/chat/completions", { model, messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 8, ...extra }, { key: k });

test("GET /metrics takes the admin token or metrics.token, and nothing else", async () => {
  assert.deepEqual(await errorOf(await srv.get("/metrics")), { status: 401, type: "authentication_error", code: "invalid_api_key", param: null });
  assert.equal((await errorOf(await srv.get("/metrics", { key }))).status, 401, "an API key does not open it");
  await scrape(metricsToken);
  assert.equal((await srv.get("/admin/v1/models", { key: metricsToken })).status, 401, "the metrics token opens nothing else");
});

test("after real traffic every counter and histogram moved by the right amount, with the right labels", async () => {
  const before = await scrape();
  const at = (name: string, labels: Record<string, string>) => value(before, name, labels);

  assert.equal((await chat("no-such-model-a1b2c3")).status, 404);
  const plain = (await (await chat("stories")).json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
  const streamed = await readSse(await chat("stories", { stream: true, stream_options: { include_usage: true } }));
  const streamUsage = streamed.events.at(-1).usage as { prompt_tokens: number; completion_tokens: number };
  const emb = await srv.post("/v1/embeddings", { model: "bert-embed", input: ["a cat", "a dog"] }, { key });
  assert.equal(emb.status, 200);
  const embUsage = ((await emb.json()) as { usage: { prompt_tokens: number } }).usage;

  const limited = await srv.createKey({ plan: "three" });
  const statuses = [];
  for (let i = 0; i < 4; i++) statuses.push((await srv.get("/v1/models", { key: limited.key })).status);
  assert.deepEqual(statuses, [200, 200, 200, 429]);

  const small = await srv.createKey({ plan: "small" });
  assert.equal((await chat("stories", { messages: [{ role: "user", content: "x".repeat(5000) }] }, small.key)).status, 413);

  // 503 overloaded: parallel 1, no queue, two at once.
  const both = await Promise.all([chat("single", { max_tokens: 64 }), chat("single", { max_tokens: 64 })]);
  assert.deepEqual(both.map((r) => r.status).sort(), [200, 503]);
  await Promise.all(both.map((r) => r.arrayBuffer()));

  // An aborted stream.
  const controller = new AbortController();
  const aborted = await srv.post("/v1/chat/completions", { model: "stories", messages: [{ role: "user", content: "Once" }], max_tokens: 200, stream: true }, { key, signal: controller.signal });
  for await (const frame of sseFrames(aborted)) {
    if (frame !== "[DONE]" && frame.choices?.[0]?.delta?.content) break;
  }
  controller.abort();
  const closed = { endpoint: "chat", model: "stories", status: "499", code: "" };
  const after = await waitFor(scrape, (s) => value(s, "modelgate_requests_total", closed) > at("modelgate_requests_total", closed) && value(s, "modelgate_slots_active", { model: "stories" }) === 0, "the aborted stream's 499 and its freed slot", 5000);
  const moved = (name: string, labels: Record<string, string>) => value(after, name, labels) - at(name, labels);
  assert.equal(moved("modelgate_requests_total", { endpoint: "chat", model: "stories", status: "200", code: "" }), 2, "non-stream and stream");
  assert.equal(moved("modelgate_requests_total", { endpoint: "chat", model: "stories", status: "499", code: "" }), 1, "the aborted stream: client closed request");
  assert.equal(moved("modelgate_requests_total", { endpoint: "embeddings", model: "bert-embed", status: "200", code: "" }), 1);
  assert.equal(moved("modelgate_requests_total", { endpoint: "models", model: "", status: "429", code: "rate_limit_exceeded" }), 1);
  assert.equal(moved("modelgate_requests_total", { endpoint: "chat", model: "", status: "413", code: "request_too_large" }), 1);
  assert.equal(moved("modelgate_requests_total", { endpoint: "chat", model: "single", status: "503", code: "overloaded" }), 1);
  assert.equal(moved("modelgate_request_too_large_total", { endpoint: "chat" }), 1);
  assert.equal(moved("modelgate_rate_limit_decisions_total", { plan: "three", outcome: "limited" }), 1);
  assert.equal(moved("modelgate_rate_limit_decisions_total", { plan: "three", outcome: "allowed" }), 3);
  assert.equal(moved("modelgate_prompt_tokens_total", { model: "stories" }) >= plain.usage.prompt_tokens + streamUsage.prompt_tokens, true);
  assert.equal(moved("modelgate_prompt_tokens_total", { model: "bert-embed" }), embUsage.prompt_tokens);
  assert.ok(moved("modelgate_completion_tokens_total", { model: "stories" }) >= plain.usage.completion_tokens + streamUsage.completion_tokens);
  assert.equal(moved("modelgate_time_to_first_token_seconds", { model: "stories" }), 3, "one TTFT per generation that produced a token");
  assert.ok(moved("modelgate_inter_token_latency_seconds", { model: "stories" }) > 0);
  const rates = moved("modelgate_generation_tokens_per_second", { model: "stories" });
  assert.ok(rates >= 2 && rates <= 3, `the generations that ran to an end (the aborted one may have): ${rates}`);
  assert.equal(moved("modelgate_queue_wait_seconds", { model: "single", priority: "interactive" }), 1);
  assert.equal(moved("modelgate_overloaded_total", { model: "single", reason: "queue_full" }), 1);
  assert.equal(moved("modelgate_request_duration_seconds", { endpoint: "embeddings", model: "bert-embed" }), 1);
  assert.equal(value(after, "modelgate_model_state", { model: "stories", state: "ready" }), 1);
  assert.equal(value(after, "modelgate_model_state", { model: "stories", state: "loading" }), 0);
  assert.equal(value(after, "modelgate_slots_total", { model: "stories" }), 2);
  assert.equal(value(after, "modelgate_slots_active", { model: "stories" }), 0, "the aborted stream freed its slot");
  assert.equal(value(after, "modelgate_model_loads_total", { model: "stories", outcome: "ok" }), 1);
  assert.ok(after.families.has("modelgate_nodejs_eventloop_lag_p99_seconds"), "prom-client's default metrics, event-loop lag included");
  for (const family of after.families.values()) {
    for (const m of family.metrics) {
      for (const v of Object.values(m.labels ?? {})) {
        assert.ok(!v.includes(keyId) && !v.startsWith("req_"), `no key or request ids in labels: ${family.name} ${v}`);
        assert.ok(!v.includes("no-such-model"), `a client's unknown model name is no label: ${family.name} ${v}`);
      }
    }
  }
});

test("one access-log line per request: ids, route, status, code, key id and prefix, model, tokens, TTFT, bytes; never the key or the query", async () => {
  lines.length = 0;
  const res = await srv.post("/v1/chat/completions?api_key=sk-should-not-appear", { model: "stories", messages: [{ role: "user", content: "Once" }], max_tokens: 4 }, { key });
  const body = (await res.json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
  const id = res.headers.get("x-request-id");
  await until(() => lines.some((l) => l.reqId === id && l.msg === "request"), "the access-log line", 5000);
  const ofRequest = lines.filter((l) => l.reqId === id);
  assert.equal(ofRequest.length, 1, JSON.stringify(ofRequest));
  const line = ofRequest[0];
  assert.equal(line.msg, "request");
  assert.equal(line.method, "POST");
  assert.equal(line.route, "/v1/chat/completions");
  assert.equal(line.status, 200);
  assert.equal(line.keyId, keyId);
  assert.equal(line.keyPrefix, key.slice(0, (line.keyPrefix as string).length));
  assert.ok((line.keyPrefix as string).length < 16);
  assert.equal(line.model, "stories");
  assert.equal(line.endpoint, "chat");
  assert.equal(line.promptTokens, body.usage.prompt_tokens);
  assert.equal(line.completionTokens, body.usage.completion_tokens);
  assert.equal(typeof line.ttftMs, "number");
  assert.equal(typeof line.ms, "number");
  assert.ok((line.bytesIn as number) > 0);
  assert.ok((line.bytesOut as number) > 0);
  assert.equal(line.client, "127.0.0.1");
  for (const l of lines) {
    const text = JSON.stringify(l);
    assert.ok(!text.includes(key.slice(12)), "no key in any line");
    assert.ok(!text.includes("sk-should-not-appear") && !text.includes("?"), `no query string: ${text}`);
  }
});

test("issue 42.5: a refused request (503 overloaded) writes one log line, its access line; an admitted one's line says how long it waited for a slot", async () => {
  lines.length = 0;
  // One slot and no queue: of two at once, one runs and the other is refused (as in the metrics test above).
  const both = await Promise.all([chat("single", { max_tokens: 64 }), chat("single", { max_tokens: 64 })]);
  await Promise.all(both.map((r) => r.text()));
  assert.deepEqual(both.map((r) => r.status).sort(), [200, 503]);
  const ids = both.map((r) => r.headers.get("x-request-id"));
  await until(() => ids.every((id) => lines.some((l) => l.reqId === id && l.msg === "request")), "both access-log lines", 5000);
  const [admitted, refused] = (both[0].status === 200 ? ids : ids.reverse()).map((id) => lines.filter((l) => l.reqId === id));
  assert.deepEqual(refused.map((l) => [l.msg, l.status, l.code]), [["request", 503, "overloaded"]], "the refusal's only line");
  assert.equal(refused[0].queueMs, undefined, "a refused request never waited in the queue");
  assert.equal(admitted.length, 1);
  const line = admitted[0];
  assert.equal(typeof line.queueMs, "number");
  assert.ok((line.queueMs as number) >= 0 && (line.queueMs as number) <= (line.ms as number), JSON.stringify(line));
});

test("every metric the Grafana dashboard and the alert rules query is exported by a running server", async () => {
  const { families } = await scrape();
  const exported = new Set([...families.keys()]);
  const queried = new Set<string>();
  const dashboard = readFileSync(path.join(repoRoot, "deploy/grafana/modelgate.json"), "utf8");
  const alerts = readFileSync(path.join(repoRoot, "deploy/prometheus/alerts.yml"), "utf8");
  for (const m of `${dashboard}\n${alerts}`.matchAll(/modelgate_[a-z0-9_]+/g)) queried.add(m[0].replace(/_(bucket|sum|count)$/, ""));
  assert.ok(queried.size >= 15);
  for (const name of queried) assert.ok(exported.has(name), `${name} is exported`);
});

test("issue 46: tokens an upstream sent in one read add one inter-token gap, not one each (decision 0043)", async () => {
  const before = await scrape();
  // The canned upstream writes its whole answer, 18 content events, at once.
  const res = await srv.post("/v1/chat/completions", { model: "canned", messages: [{ role: "user", content: "Hello" }], stream: true }, { key });
  let content = "";
  for await (const frame of sseFrames(res)) if (frame !== "[DONE]") content += frame.choices?.[0]?.delta?.content ?? "";
  assert.equal(content, "Once upon a time there was a little girl who loved to play in the park with her dog");
  const after = await scrape();
  const moved = (name: string) => value(after, name, { model: "canned" }) - value(before, name, { model: "canned" });
  assert.equal(moved("modelgate_time_to_first_token_seconds"), 1);
  assert.ok(moved("modelgate_inter_token_latency_seconds") <= 2, `gaps observed: ${moved("modelgate_inter_token_latency_seconds")} (one per read of the stream)`);
});
