// The flooding account: as fast as its answers come, on `loops` connections; most of it is refused with 429.
import { jsonCall, running, settings, sleep } from "./soak-client.mjs";

const { key, keyId, loops } = settings;

async function loop() {
  while (running()) {
    const answered = await jsonCall("flood chat", "/v1/chat/completions", { key, keyId, body: { model: "stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 8 }, bound: 600, limitHeader: true });
    // A 429 answers in a millisecond: without a breath the flood is a CPU test of this machine, not of the server.
    if (!answered) await sleep(100);
  }
}

await Promise.all(Array.from({ length: loops }, loop));
