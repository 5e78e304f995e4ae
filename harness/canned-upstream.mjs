// A fixed, fast OpenAI-style upstream for the gateway benchmarks and the upstream tests: every chat request gets the same canned
// completion, as JSON or (stream: true) as the chunks an OpenAI-style server sends. `node canned-upstream.mjs [PORT]`;
// prints its port.
import { createServer } from "node:http";

const words = "Once upon a time there was a little girl who loved to play in the park with her dog".split(" ");
const completion = JSON.stringify({
  id: "chatcmpl-canned",
  object: "chat.completion",
  created: 1,
  model: "canned",
  choices: [{ index: 0, message: { role: "assistant", content: words.join(" ") }, logprobs: null, finish_reason: "stop" }],
  usage: { prompt_tokens: 8, completion_tokens: words.length, total_tokens: 8 + words.length },
});
const chunk = (delta, finish = null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-canned", object: "chat.completion.chunk", created: 1, model: "canned", choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
const stream =
  chunk({ role: "assistant", content: "" }) +
  words.map((w, i) => chunk({ content: i === 0 ? w : ` ${w}` })).join("") +
  chunk({}, "stop") +
  `data: ${JSON.stringify({ id: "chatcmpl-canned", object: "chat.completion.chunk", created: 1, model: "canned", choices: [], usage: { prompt_tokens: 8, completion_tokens: words.length, total_tokens: 8 + words.length } })}\n\n` +
  "data: [DONE]\n\n";

const server = createServer((req, res) => {
  let body = "";
  req.setEncoding("utf8").on("data", (d) => (body += d));
  req.on("end", () => {
    if (JSON.parse(body || "{}").stream === true) res.writeHead(200, { "content-type": "text/event-stream" }).end(stream);
    else res.writeHead(200, { "content-type": "application/json" }).end(completion);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.argv[2] ?? 0), "127.0.0.1", () => console.log(`listening ${server.address().port}`));
