// An OpenAI-style upstream whose usage follows the request, for the token-limit benchmark: the prompt counts a token
// per 4 characters of the messages (what the gateway estimates with `tokenize: none`), and the completion is a
// random share (30–100%) of max_tokens, streamed as one chunk with the usage chunk. `node sized-upstream.mjs`;
// prints its port.
import { createServer } from "node:http";

const chunk = (obj) => `data: ${JSON.stringify(obj)}\n\n`;
const server = createServer((req, res) => {
  let body = "";
  req.setEncoding("utf8").on("data", (d) => (body += d));
  req.on("end", () => {
    const request = JSON.parse(body || "{}");
    const chars = (request.messages ?? []).reduce((n, m) => n + (typeof m.content === "string" ? m.content.length : 0), 0);
    const prompt = Math.ceil(chars / 4);
    const completion = Math.max(1, Math.round((request.max_tokens ?? 16) * (0.3 + 0.7 * Math.random())));
    const usage = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
    const base = { id: "chatcmpl-sized", object: "chat.completion.chunk", created: 1, model: "sized" };
    if (request.stream !== true) {
      res.writeHead(200, { "content-type": "application/json" }).end(
        JSON.stringify({ ...base, object: "chat.completion", choices: [{ index: 0, message: { role: "assistant", content: "word ".repeat(completion) }, finish_reason: "length" }], usage }),
      );
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream" }).end(
      chunk({ ...base, choices: [{ index: 0, delta: { role: "assistant", content: "word ".repeat(completion) }, finish_reason: null }] }) +
        chunk({ ...base, choices: [{ index: 0, delta: {}, finish_reason: "length" }] }) +
        chunk({ ...base, choices: [], usage }) +
        "data: [DONE]\n\n",
    );
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => console.log(`listening ${server.address().port}`));
