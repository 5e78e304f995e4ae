// A conversation's two turns with other requests in between: prints {ttft1, ttft2, promptTokens1, promptTokens2}
// (ms to the first content byte of each streamed turn). `others` one-off requests run between the turns.
// `node turns-client.mjs URL MODEL WORDS OTHERS RUN KEY CA_FILE`
import { readFileSync } from "node:fs";
import { Agent, request } from "undici";

const [url, model, words, others, run, key, caFile] = process.argv.slice(2);
const dispatcher = new Agent({ connect: { ca: readFileSync(caFile, "utf8") } });
const headers = { "content-type": "application/json", authorization: `Bearer ${key}` };
const vocabulary = ["river", "garden", "lantern", "winter", "copper", "meadow", "harbor", "thunder", "velvet", "orchard", "signal", "marble"];
const history = Array.from({ length: Number(words) }, (_, i) => vocabulary[(i * 7 + Number(run) * 3) % vocabulary.length] + (i % 13 === 12 ? "." : "")).join(" ");

async function turn(messages) {
  const t0 = performance.now();
  const res = await request(url, { method: "POST", headers, dispatcher, body: JSON.stringify({ model, messages, max_tokens: 4, temperature: 0, stream: true, stream_options: { include_usage: true } }) });
  let ttft = -1;
  let text = "";
  for await (const chunk of res.body) {
    text += chunk;
    if (ttft < 0 && /"content":"[^"]/.test(text)) ttft = performance.now() - t0;
  }
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}: ${text.slice(0, 200)}`);
  const frames = text.split("\n\n").filter((f) => f.startsWith("data: {")).map((f) => JSON.parse(f.slice(6)));
  const answer = frames.map((f) => f.choices?.[0]?.delta?.content ?? "").join("");
  return { ttft, answer, promptTokens: frames.find((f) => f.usage)?.usage.prompt_tokens };
}

const conversation = [{ role: "user", content: `${history}\nWhat comes next?` }];
const first = await turn(conversation);
for (let i = 0; i < Number(others); i++) await turn([{ role: "user", content: `Unrelated question number ${i} of run ${run}?` }]);
conversation.push({ role: "assistant", content: first.answer }, { role: "user", content: "And then?" });
const second = await turn(conversation);
console.log(JSON.stringify({ ttft1: first.ttft, ttft2: second.ttft, promptTokens1: first.promptTokens, promptTokens2: second.promptTokens }));
await dispatcher.close();
