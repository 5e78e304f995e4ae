// The floor of Modelgate's own stack for a chat through an upstream: Fastify over HTTPS with pino at info and one
// access line per request, the JSON body parsed, an undici Pool to the upstream, the answer re-serialised; no key,
// limit, schema, scheduler, usage, metric or span. `node fastify-floor.mjs CERT KEY TARGET_PORT json|sse
// [MODELS_FILE]`: for a non-stream chat, json asks the upstream for JSON; sse asks for a stream (as Modelgate does,
// for its stall timeouts), parses each event and joins the content. A streamed chat (`stream: true`) is relayed:
// each event parsed and written again, one write per chunk read from the upstream. With MODELS_FILE, GET /v1/models
// answers its bytes (the floor of an authenticated list: Fastify, its child logger, the access line). Prints its port.
import { readFileSync } from "node:fs";
import Fastify, { LogController } from "fastify";
import { Pool } from "undici";
import { createParser } from "eventsource-parser";

const [cert, key, targetPort, mode, modelsFile] = process.argv.slice(2);
const pool = new Pool(`http://127.0.0.1:${targetPort}`, { keepAliveTimeout: 30_000 });
const app = Fastify({ https: { cert: readFileSync(cert), key: readFileSync(key) }, logger: { level: "info" }, logController: new LogController({ disableRequestLogging: true }), keepAliveTimeout: 60_000 });
app.addHook("onResponse", (request, reply, done) => {
  request.log.info({ method: request.method, url: request.url, status: reply.statusCode, ms: reply.elapsedTime }, "request");
  done();
});

async function joinStream(body) {
  let content = "";
  let usage = null;
  let finish = null;
  const parser = createParser({
    onEvent: (event) => {
      if (event.data === "[DONE]") return;
      const chunk = JSON.parse(event.data);
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices?.[0];
      if (choice?.delta?.content) content += choice.delta.content;
      if (choice?.finish_reason) finish = choice.finish_reason;
    },
  });
  const decoder = new TextDecoder();
  for await (const part of body) parser.feed(decoder.decode(part, { stream: true }));
  return { id: "chatcmpl-floor", object: "chat.completion", created: 1, model: "canned", choices: [{ index: 0, message: { role: "assistant", content }, logprobs: null, finish_reason: finish }], usage };
}

async function relayStream(body, reply) {
  reply.hijack();
  reply.raw.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  let out = "";
  const parser = createParser({
    onEvent: (event) => {
      out += event.data === "[DONE]" ? "data: [DONE]\n\n" : `data: ${JSON.stringify(JSON.parse(event.data))}\n\n`;
    },
  });
  const decoder = new TextDecoder();
  for await (const part of body) {
    parser.feed(decoder.decode(part, { stream: true }));
    if (out) reply.raw.write(out);
    out = "";
  }
  reply.raw.end();
}

app.post("/v1/chat/completions", async (request, reply) => {
  const stream = request.body.stream === true;
  const body = JSON.stringify({ ...request.body, stream: stream || mode === "sse" });
  const answer = await pool.request({ method: "POST", path: "/v1/chat/completions", headers: { "content-type": "application/json" }, body });
  if (stream) return relayStream(answer.body, reply);
  return mode === "sse" ? joinStream(answer.body) : answer.body.json();
});
if (modelsFile) {
  const models = readFileSync(modelsFile, "utf8");
  app.get("/v1/models", (_request, reply) => reply.type("application/json; charset=utf-8").send(models));
}
await app.ready();
// Listening on the server itself: Fastify's own listen would log a line before ours.
app.server.listen(0, "127.0.0.1", () => console.log(`listening ${app.server.address().port}`));
