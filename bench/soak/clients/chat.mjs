// Chat traffic: `loops` loops, each a streamed or a non-stream completion on one of `models` in turn, then a pause.
// 5% of streams are aborted by the client at a random point; they go with `abortKey`, so that `key`'s usage can be
// compared exactly with what its answers said.
import { jsonCall, pick, running, settings, sleep, streamCall } from "./soak-client.mjs";

const { models, key, keyId, abortKey, abortKeyId, loops, maxTokens, pauseMs } = settings;
const prompts = ["Once upon a time", "The little dog ran to the park", "Lily found a red ball", "Tom and his cat went for a walk"];
const bound = 600 + maxTokens;

async function loop() {
  while (running()) {
    const model = pick(models);
    const body = { model, messages: [{ role: "user", content: pick(prompts) }], max_tokens: maxTokens, temperature: 0.8 };
    if (Math.random() < 0.5) await jsonCall(`chat ${model}`, "/v1/chat/completions", { key, keyId, body, bound });
    else if (Math.random() < 0.05) await streamCall(`stream ${model}`, { key: abortKey, keyId: abortKeyId, body, abortAfter: 1 + Math.floor(Math.random() * 8), bound });
    else await streamCall(`stream ${model}`, { key, keyId, body, bound });
    await sleep(pauseMs * (0.5 + Math.random()));
  }
}

await Promise.all(Array.from({ length: loops }, loop));
