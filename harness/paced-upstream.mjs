// An OpenAI-style upstream whose every chat completion takes a fixed time: the same completion of 16 words, streamed
// evenly over `durationMs` (± `jitter`, a fraction: 0.25 is ±25%, uniformly), or answered as JSON after that time.
// Used by the fair-share tests and `npm run bench -- tenants`. `node paced-upstream.mjs PORT DURATION_MS JITTER`
// prints `listening PORT`.
import { createServer } from "node:http";
import { pathToFileURL } from "node:url";

const words = "Once upon a time there was a little girl who loved to play in the park with her dog".split(" ");
const usage = { prompt_tokens: 8, completion_tokens: words.length, total_tokens: 8 + words.length };
const chunk = (delta, finish = null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-paced", object: "chat.completion.chunk", created: 1, model: "paced", choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;

/** Starts the upstream on `port` (0: any); resolves with the server and its port. */
export function startPacedUpstream({ port = 0, durationMs = 200, jitter = 0 } = {}) {
  const server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8").on("data", (d) => (body += d));
    req.on("end", () => {
      const total = durationMs * (1 + jitter * (2 * Math.random() - 1));
      const stream = JSON.parse(body || "{}").stream === true;
      let closed = false;
      res.on("close", () => (closed = true));
      if (!stream) {
        setTimeout(() => {
          if (closed) return;
          res.writeHead(200, { "content-type": "application/json" }).end(
            JSON.stringify({ id: "chatcmpl-paced", object: "chat.completion", created: 1, model: "paced", choices: [{ index: 0, message: { role: "assistant", content: words.join(" ") }, logprobs: null, finish_reason: "stop" }], usage }),
          );
        }, total);
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(chunk({ role: "assistant", content: "" }));
      let i = 0;
      const step = total / words.length;
      const started = performance.now();
      const next = () => {
        if (closed) return;
        res.write(chunk({ content: i === 0 ? words[i] : ` ${words[i]}` }));
        i++;
        if (i < words.length) return void setTimeout(next, Math.max(0, started + step * (i + 1) - performance.now()));
        res.end(chunk({}, "stop") + `data: ${JSON.stringify({ id: "chatcmpl-paced", object: "chat.completion.chunk", created: 1, model: "paced", choices: [], usage })}\n\n` + "data: [DONE]\n\n");
      };
      setTimeout(next, step);
    });
  });
  server.keepAliveTimeout = 60_000;
  return new Promise((resolve) => server.listen(port, "127.0.0.1", () => resolve({ server, port: server.address().port })));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const { port } = await startPacedUpstream({ port: Number(process.argv[2] ?? 0), durationMs: Number(process.argv[3] ?? 200), jitter: Number(process.argv[4] ?? 0) });
  console.log(`listening ${port}`);
}
