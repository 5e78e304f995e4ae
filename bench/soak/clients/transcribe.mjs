// A transcription every few seconds (JFK's 11 s, as a multipart upload), each on a new connection: kept alive, the
// one connection stayed on one replica for minutes, and that replica's RSS stood 20–25 MB higher meanwhile (decision
// 0052), which the leak fit read as a slope.
import { readFileSync } from "node:fs";
import { jsonCall, running, settings, sleep } from "./soak-client.mjs";

const { key, keyId, audioFile, pauseMs } = settings;
const audio = readFileSync(audioFile);

while (running()) {
  const form = new FormData();
  form.append("model", "whisper");
  form.append("file", new Blob([audio], { type: "audio/wav" }), "jfk.wav");
  form.append("response_format", "verbose_json");
  // Charged: the audio's seconds (rounded up) as prompt tokens, and the text's tokens, which no answer states.
  await jsonCall("transcription", "/v1/audio/transcriptions", { key, keyId, form, bound: 64, usageOf: (t) => ({ prompt_tokens: Math.ceil(t.duration), completion_tokens: null }), connectionEach: true });
  await sleep(pauseMs * (0.5 + Math.random()));
}
