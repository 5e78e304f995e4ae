import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { modelsDir, startServer, tempDir, type TestServer } from "../harness/server.ts";
import { readSse } from "./helpers/sse.ts";

/**
 * Issue 19: OpenTelemetry traces of one streamed chat through a front node whose model is an upstream (another
 * Modelgate node), collected by a small OTLP/HTTP receiver in this test. Tracing is on because
 * OTEL_EXPORTER_OTLP_ENDPOINT is set before the servers start (this file runs in its own process).
 */
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: { key: string; value: { stringValue?: string; intValue?: string | number; doubleValue?: number } }[];
  resource: string;
}

const spans: OtlpSpan[] = [];
let receiver: Server;
let back: TestServer;
let front: TestServer;
let key: string;

before(async () => {
  receiver = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8").on("data", (d: string) => (body += d));
    req.on("end", () => {
      const data = JSON.parse(body) as { resourceSpans: { resource: { attributes: OtlpSpan["attributes"] }; scopeSpans: { spans: OtlpSpan[] }[] }[] };
      for (const rs of data.resourceSpans) {
        const service = rs.resource.attributes.find((a) => a.key === "service.name")?.value.stringValue ?? "";
        for (const ss of rs.scopeSpans) for (const s of ss.spans) spans.push({ ...s, resource: service });
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  process.env.OTEL_BSP_SCHEDULE_DELAY = "50";
  back = await startServer({ models: [{ id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, threads: 1 }] });
  const backKey = await back.createKey();
  const caFile = path.join(tempDir("tracing-"), "ca.pem");
  writeFileSync(caFile, back.ca);
  front = await startServer({
    models: [{ id: "up-stories", engine: "upstream", protocol: "modelgate", capabilities: ["chat"], upstreams: [{ url: back.baseURL, apiKey: backKey.key, model: "stories", ca: caFile }] }],
  });
  key = (await front.createKey()).key;
});

after(async () => {
  await front?.close();
  await back?.close();
  receiver?.close();
});

const attr = (s: OtlpSpan, name: string) => {
  const v = s.attributes.find((a) => a.key === name)?.value;
  return v?.stringValue ?? (v?.intValue !== undefined ? Number(v.intValue) : v?.doubleValue);
};

test("one streamed chat: request, prepare, queue wait, generation and upstream spans, linked across nodes by W3C trace context", async () => {
  const clientTrace = "0af7651916cd43dd8448eb211c80319c";
  const clientSpan = "b7ad6b7169203331";
  const res = await front.post(
    "/v1/chat/completions",
    { model: "up-stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 8, temperature: 0, stream: true, stream_options: { include_usage: true } },
    { key, headers: { traceparent: `00-${clientTrace}-${clientSpan}-01` } },
  );
  const body = await readSse(res);
  const usage = body.events.at(-1).usage as { prompt_tokens: number; completion_tokens: number };

  const deadline = Date.now() + 10_000;
  const named = (name: string) => spans.filter((s) => s.name === name && s.traceId === clientTrace);
  while (Date.now() < deadline && (named("chat up-stories").length === 0 || named("chat stories").length === 0)) await new Promise((r) => setTimeout(r, 50));

  const [request] = named("chat up-stories");
  assert.ok(request, `the front's request span: ${spans.map((s) => s.name).join(", ")}`);
  assert.equal(request.parentSpanId, clientSpan, "continues the client's trace");
  assert.equal(request.kind, 2, "SERVER");
  assert.equal(attr(request, "gen_ai.operation.name"), "chat");
  assert.equal(attr(request, "gen_ai.request.model"), "up-stories");
  assert.equal(attr(request, "gen_ai.request.max_tokens"), 8);
  assert.equal(attr(request, "gen_ai.usage.input_tokens"), usage.prompt_tokens);
  assert.equal(attr(request, "gen_ai.usage.output_tokens"), usage.completion_tokens);

  const children = (parent: OtlpSpan, name: string) => spans.filter((s) => s.parentSpanId === parent.spanId && s.name === name);
  const [prepare] = children(request, "prepare");
  const [wait] = children(request, "queue wait");
  const [generation] = children(request, "generation");
  assert.ok(prepare && wait && generation, `prepare, queue wait and generation are children of the request span: ${JSON.stringify(spans.map((s) => [s.name, s.spanId, s.parentSpanId]))}`);
  const [tokenize] = children(prepare, "upstream POST /tokenize");
  assert.ok(tokenize, "the prompt count with the back node is a client span under prepare");
  const [upstreamChat] = children(generation, "upstream POST /chat/completions");
  assert.ok(upstreamChat, "the upstream call is a client span under generation");
  assert.equal(upstreamChat.kind, 3, "CLIENT");

  // The back node continues the trace under the front's upstream span.
  const backChat = named("chat stories").find((s) => s.parentSpanId === upstreamChat.spanId);
  assert.ok(backChat, "the back node's request span is a child of the front's upstream call");
  assert.equal(attr(backChat, "gen_ai.usage.output_tokens"), usage.completion_tokens);
  assert.ok(children(backChat, "generation").length === 1);
});
