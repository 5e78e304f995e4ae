// Issue 29.7: one upload cannot exhaust memory. The container's declared channels, rate and length are checked
// before decoding, decoding stops at a samples budget whatever the container said, the recording is never held at
// its source rate, and the decode worker's heap is bounded.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { AudioDecoder } from "../src/audio/audio-decoder.ts";
import { decodeToMono16k } from "../src/audio/decode.ts";
import { isAppError } from "../src/errors/app-error.ts";
import { flacBomb, m4aManyChunks, opusBomb } from "./helpers/crafted-audio.ts";
import { modelsDir, startServer, type TestServer } from "../harness/server.ts";

let srv: TestServer;
let key: string;

before(async () => {
  srv = await startServer({
    models: [{ id: "whisper", engine: "onnx", source: path.join(modelsDir, "forged/whisper-scripted"), capabilities: ["transcriptions"], threads: 1, limits: { maxAudioSeconds: 60 } }],
  });
  key = (await srv.createKey()).key;
});

after(async () => {
  await srv?.close();
});

function transcribe(bytes: Uint8Array, name: string): Promise<Response> {
  const form = new FormData();
  form.append("model", "whisper");
  form.append("file", new Blob([new Uint8Array(bytes)]), name);
  return srv.post("/v1/audio/transcriptions", form, { key });
}

async function assertRefused(res: Response, pattern: RegExp): Promise<void> {
  const body = (await res.json()) as { error: { code: string; param: string; message: string } };
  assert.equal(res.status, 400, JSON.stringify(body));
  assert.deepEqual([body.error.code, body.error.param], ["invalid_parameter", "file"]);
  assert.match(body.error.message, pattern);
}

const jfk = () => readFileSync(path.join(modelsDir, "jfk.wav"));

// 300 frames of 65,535 samples on 8 channels at 384 kHz: 11 KB that decode to 157 million samples (630 MB of floats).
const bomb = (declareTotal: boolean) => flacBomb({ frames: 300, channels: 8, sampleRate: 384_000, declareTotal });

test("issue 29.7 a FLAC of 8 channels at 384 kHz past the model's samples budget (maxAudioSeconds 60) is refused before decoding; the server answers the next upload", async () => {
  const started = Date.now();
  await assertRefused(await transcribe(bomb(true), "bomb.flac"), /declares 157284000 samples \(8 channels at 384000 Hz\); the limit is 5760000/);
  // The frames' own headers count, not the total STREAMINFO declares (0: unknown).
  await assertRefused(await transcribe(bomb(false), "bomb.flac"), /declares 157284000 samples/);
  assert.ok(Date.now() - started < 5000, `answered after ${Date.now() - started} ms`);
  assert.equal((await transcribe(jfk(), "jfk.wav")).status, 200);
});

test("issue 29.7 an Ogg Opus file that declares no length is stopped while decoding, once it passes the limit", async () => {
  // 3 KB of 2-byte packets, each 120 ms of stereo: 92 s at 48 kHz.
  const opus = opusBomb(1000);
  await assertRefused(await transcribe(opus, "bomb.ogg"), /longer than 60 seconds, the limit/);
  await assert.rejects(decodeToMono16k(opus, { maxSeconds: 80 }), (err: unknown) => isAppError(err) && err.param === "file" && /longer than 80 seconds/.test(err.message));
  assert.equal((await transcribe(jfk(), "jfk.wav")).status, 200);
});

test("issue 29.7 within the budget, memory follows the 16 kHz output, not the source: 157 million samples decode with under 200 MB more memory", async () => {
  const decoder = new AudioDecoder(1);
  // The worker is started (and its codecs loaded) before the measure begins.
  await decoder.decode(jfk(), new AbortController().signal, { maxSeconds: 7200 });
  let peak = 0;
  const base = process.memoryUsage.rss();
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss() - base)), 10);
  try {
    const decoded = await decoder.decode(bomb(false), new AbortController().signal, { maxSeconds: 7200 });
    assert.equal(decoded.sourceChannels, 8);
    assert.ok(Math.abs(decoded.duration - (300 * 65535) / 384_000) < 0.01, `duration ${decoded.duration}`);
  } finally {
    clearInterval(sampler);
    await decoder.close();
  }
  assert.ok(peak < 200 * 1024 * 1024, `peak extra memory ${Math.round(peak / 1024 / 1024)} MB`);
});

test("issue 29.7 a decode worker stopped at its heap limit answers 400 param=file, and a new worker decodes the next upload", async () => {
  // 300,000 one-sample chunks: the MP4 decoder builds an object per chunk-table entry, more than a 16 MB heap holds.
  const decoder = new AudioDecoder(1, { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 4 });
  const signal = new AbortController().signal;
  try {
    await assert.rejects(decoder.decode(m4aManyChunks(300_000), signal, { maxSeconds: 7200 }), (err: unknown) => {
      assert.ok(isAppError(err) && err.code === "invalid_parameter" && err.param === "file", String(err));
      assert.match(err.message, /more memory to decode than the server allows/);
      return true;
    });
    assert.equal((await decoder.decode(jfk(), signal, { maxSeconds: 7200 })).audio.length, 176_000);
  } finally {
    await decoder.close();
  }
});

test("issue 29.7 an MP4 sample table longer than the file is refused before a decoder allocates it", async () => {
  const file = m4aManyChunks(10);
  // stsz: constant size 1, then the count: 50 million samples in a file of a few hundred bytes.
  const stsz = file.indexOf("stsz");
  file.writeUInt32BE(50_000_000, stsz + 12);
  const started = Date.now();
  await assert.rejects(decodeToMono16k(file), (err: unknown) => isAppError(err) && err.param === "file" && /'stsz' table declares 50000000 samples/.test(err.message));
  assert.ok(Date.now() - started < 1000, `answered after ${Date.now() - started} ms`);
});
