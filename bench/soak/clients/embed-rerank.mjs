// Embeddings and rerank, alternating, with a pause between requests.
import { jsonCall, pick, running, settings, sleep } from "./soak-client.mjs";

const { key, keyId, pauseMs } = settings;
const sentences = ["A cat and a dog play in the park", "My dog likes to play with a ball in the park", "The cat sat on the mat", "Paris is the capital of France."];

while (running()) {
  if (Math.random() < 0.5) await jsonCall("embeddings", "/v1/embeddings", { key, keyId, body: { model: "embed", input: [pick(sentences), pick(sentences)] }, bound: 64 });
  else await jsonCall("rerank", "/v1/rerank", { key, keyId, body: { model: "rerank", query: "What is the capital of France?", documents: sentences }, bound: 128 });
  await sleep(pauseMs * (0.5 + Math.random()));
}
