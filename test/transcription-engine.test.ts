import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { before, test } from "node:test";
import { decodeToMono16k } from "../src/audio/decode.ts";
import { findVadModel } from "../src/engines/onnx/whisper-engine.ts";
import { WhisperRunner } from "../src/engines/onnx/tasks/whisper.task.ts";
import { modelsDir } from "../harness/server.ts";
import { modelEntry } from "./helpers/model-entry.ts";

/** The whisper task logic on the main thread (the same code the workers run), on the scripted model. */
const whisperDir = path.join(modelsDir, "forged/whisper-scripted");
let runner: WhisperRunner;
let jfk: Float32Array;

before(async () => {
  runner = await WhisperRunner.load({ path: whisperDir, dtype: null, threads: 1 });
  jfk = (await decodeToMono16k(readFileSync(path.join(modelsDir, "jfk.wav")))).audio;
});


/** The engine reads the decoded audio from the prepared request; these tests hand it decoded PCM directly. */
const noFile = { bytes: new Uint8Array(0), filename: null, mimetype: null };

test("features computed on the audio part only equal the extractor's 30 s features exactly", async () => {
  for (const audio of [jfk, jfk.subarray(0, 16000 * 3), new Float32Array(16000 * 5), jfk.subarray(1234, 16000 * 9 + 77)]) {
    const fast = await runner.features(audio);
    const reference = await runner.referenceFeatures(audio);
    assert.deepEqual(fast.dims, reference.dims);
    assert.deepEqual(fast.data, reference.data);
  }
});

test("§4.4 language detection is one decoder step over lang_to_id: the scripted model says de", async () => {
  assert.equal(await runner.detectLanguageOf(jfk), "de");
  const events: unknown[] = [];
  const result = await runner.transcribeWindow(
    { audio: jfk, language: null, prompt: null, temperature: 0 },
    { signal: new AbortController().signal, emit: (v) => events.push(v) },
  );
  assert.deepEqual(events, [{ language: "de" }]);
  assert.equal(result.language, "de");
  assert.equal(result.segments.length, 3);
});

test("timestamp tokens split the generated ids into segments; a missing closing timestamp ends at the window end", () => {
  // <|0.00|> And so<|2.00|><|2.00|> fellow  (eos)
  const ids = [50364, 400, 370, 50464, 50464, 7177, 50257];
  const { segments, tokens } = runner.segmentsFrom(ids, 7.5);
  assert.equal(tokens, 3);
  assert.deepEqual(segments, [
    { start: 0, end: 2, text: " And so" },
    { start: 2, end: 7.5, text: " fellow" },
  ]);
});

test("the VAD model is found next to the models directory or through MODELGATE_VAD_MODEL", () => {
  assert.equal(findVadModel(whisperDir, ""), path.join(modelsDir, "silero_vad.onnx"));
  assert.equal(findVadModel(whisperDir, path.join(modelsDir, "silero_vad.onnx")), path.join(modelsDir, "silero_vad.onnx"));
  assert.equal(findVadModel(whisperDir, "/nonexistent/vad.onnx"), null);
  assert.equal(findVadModel("/nonexistent/model", ""), null);
});

test("§4.4 OnnxWhisperEngine runs the windows in parallel up to the model's parallel, in worker threads", async () => {
  const { OnnxWhisperEngine } = await import("../src/engines/onnx/whisper-engine.ts");
  const entry = modelEntry({ id: "whisper", engine: "onnx", source: whisperDir, capabilities: ["transcriptions"], threads: 1, parallel: 2 });
  const engine = new OnnxWhisperEngine(entry);
  await engine.load();
  try {
    const unit = jfk.length + 5 * 16000;
    const audio = new Float32Array(unit * 4);
    for (let i = 0; i < 4; i++) audio.set(jfk, i * unit);
    const transcript = await engine.transcribe({ file: noFile, language: "en", prompt: null, temperature: 0 }, { audio, windows: 0 }, new AbortController().signal, 2);
    assert.equal(transcript.windows, 4);
    assert.equal(transcript.segments.length, 12);
    assert.equal(transcript.language, "en");
    assert.equal(engine.poolStats().peakInFlight, 2, "two leased slots: two windows at once in the worker pool");

    // An aborted request stops: the call rejects with the signal's reason.
    const controller = new AbortController();
    const running = engine.transcribe({ file: noFile, language: null, prompt: null, temperature: 0 }, { audio, windows: 0 }, controller.signal, 2);
    setTimeout(() => controller.abort(new Error("client went away")), 50);
    await assert.rejects(running, /client went away/);
  } finally {
    await engine.unload();
  }
});

test("§4.4 without a VAD model, long audio gets fixed overlapping windows and each segment is kept once", async () => {
  const { OnnxWhisperEngine } = await import("../src/engines/onnx/whisper-engine.ts");
  const entry = modelEntry({ id: "whisper", engine: "onnx", source: whisperDir, capabilities: ["transcriptions"], threads: 1, parallel: 1 });
  const saved = process.env.MODELGATE_VAD_MODEL;
  process.env.MODELGATE_VAD_MODEL = "/nonexistent/silero_vad.onnx";
  const engine = new OnnxWhisperEngine(entry);
  if (saved === undefined) delete process.env.MODELGATE_VAD_MODEL;
  else process.env.MODELGATE_VAD_MODEL = saved;
  await engine.load();
  try {
    const audio = new Float32Array(64 * 16000);
    for (let i = 0; i < 4; i++) audio.set(jfk, i * 16 * 16000);
    const transcript = await engine.transcribe({ file: noFile, language: "en", prompt: null, temperature: 0 }, { audio, windows: 0 }, new AbortController().signal, 1);
    // [0,30] [28,58] [56,64]: each gives the 3 scripted segments from its start, clamped to the window.
    assert.equal(transcript.windows, 3);
    assert.deepEqual(
      transcript.segments.map((s) => [s.start, s.end]),
      [[0, 4], [4, 8], [8, 11], [28, 32], [32, 36], [36, 39], [56, 60], [60, 64], [64, 64]],
    );
    assert.deepEqual(transcript.segments.map((s) => s.id), [0, 1, 2, 3, 4, 5, 6, 7, 8]);
  } finally {
    await engine.unload();
  }
});
