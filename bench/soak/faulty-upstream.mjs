// An OpenAI-style upstream the soak turns bad on a schedule: `POST /control {"mode": M}` sets how it answers chat
// from then on. ok: 16 words streamed over ~160 ms (JSON for a non-stream request); stall: headers and two chunks,
// then nothing (the idle timeout's case); reset: two chunks, then the connection is reset; error: 500; slow: the
// same answer spread over 3 s. GET /health is 200 in every mode. `node faulty-upstream.mjs [PORT]` prints its port.
import { createServer } from "node:http";

const words = "Once upon a time there was a little girl who loved to play in the park with her dog".split(" ");
const usage = { prompt_tokens: 8, completion_tokens: words.length, total_tokens: 8 + words.length };
const chunk = (delta, finish = null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-faulty", object: "chat.completion.chunk", created: 1, model: "faulty", choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
const tail = chunk({}, "stop") + `data: ${JSON.stringify({ id: "chatcmpl-faulty", object: "chat.completion.chunk", created: 1, model: "faulty", choices: [], usage })}\n\n` + "data: [DONE]\n\n";
const completion = JSON.stringify({ id: "chatcmpl-faulty", object: "chat.completion", created: 1, model: "faulty", choices: [{ index: 0, message: { role: "assistant", content: words.join(" ") }, logprobs: null, finish_reason: "stop" }], usage });

let mode = "ok";

function stream(res, stepMs, cut) {
  res.writeHead(200, { "content-type": "text/event-stream" });
  res.write(chunk({ role: "assistant", content: "" }));
  let i = 0;
  let closed = false;
  res.on("close", () => (closed = true));
  const next = () => {
    if (closed) return;
    if (cut && i === 2) return cut === "reset" ? res.socket?.resetAndDestroy() : undefined;
    res.write(chunk({ content: i === 0 ? words[i] : ` ${words[i]}` }));
    if (++i < words.length) setTimeout(next, stepMs);
    else res.end(tail);
  };
  setTimeout(next, stepMs);
}

const server = createServer((req, res) => {
  let body = "";
  req.setEncoding("utf8").on("data", (d) => (body += d));
  req.on("end", () => {
    if (req.url === "/health") return void res.writeHead(200, { "content-type": "application/json" }).end('{"status":"ok"}');
    if (req.url === "/control") {
      mode = JSON.parse(body).mode;
      return void res.writeHead(200).end(mode);
    }
    const streamed = JSON.parse(body || "{}").stream === true;
    if (mode === "error") return void res.writeHead(500, { "content-type": "application/json" }).end('{"error":{"message":"injected"}}');
    if (!streamed && (mode === "ok" || mode === "slow")) return void setTimeout(() => res.writeHead(200, { "content-type": "application/json" }).end(completion), mode === "slow" ? 3000 : 160);
    if (mode === "stall" || mode === "reset") return stream(res, 10, mode);
    stream(res, mode === "slow" ? 190 : 10, null);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.argv[2] ?? 0), "127.0.0.1", () => console.log(`listening ${server.address().port}`));
