import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { decodeToMono16k } from "../src/audio/decode.ts";
import { mixdown, resample } from "../src/audio/resample.ts";
import { sniffFormat } from "../src/audio/sniff.ts";
import { SileroVad } from "../src/audio/vad.ts";
import { defaultWindowOptions, planWindows } from "../src/audio/windows.ts";
import { isAppError } from "../src/errors/app-error.ts";
import { modelsDir } from "../harness/server.ts";

function tone(freq: number, rate: number, seconds: number): Float32Array {
  const out = new Float32Array(Math.round(rate * seconds));
  for (let i = 0; i < out.length; i++) out[i] = Math.sin((2 * Math.PI * freq * i) / rate);
  return out;
}

/** RMS over the middle 80 %, away from the filter's edge effects. */
function rms(x: Float32Array): number {
  const lo = Math.floor(x.length * 0.1);
  const hi = Math.floor(x.length * 0.9);
  let sum = 0;
  for (let i = lo; i < hi; i++) sum += x[i] * x[i];
  return Math.sqrt(sum / (hi - lo));
}

const gainDb = (input: Float32Array, output: Float32Array) => 20 * Math.log10(rms(output) / rms(input));

test("§4.4 resampler: a 10 kHz tone at 44.1 kHz comes out at least 40 dB down at 16 kHz", () => {
  const input = tone(10_000, 44_100, 1);
  const out = resample(input, 44_100, 16_000);
  assert.equal(out.length, 16_000);
  const db = gainDb(input, out);
  assert.ok(db <= -40, `10 kHz came out at ${db.toFixed(1)} dB`);
  // What sample dropping (nearest neighbour) would do: the tone folds to 6 kHz at nearly full level.
  const dropped = new Float32Array(16_000).map((_, i) => input[Math.floor((i * 44_100) / 16_000)]);
  assert.ok(gainDb(input, dropped) > -3);
});

test("§4.4 resampler: speech-band tones pass (44.1, 48, 22.05 and 8 kHz sources)", () => {
  for (const [freq, rate] of [[1000, 44_100], [3000, 48_000], [440, 22_050], [1000, 8000], [5000, 44_056]]) {
    const input = tone(freq, rate, 1);
    const out = resample(input, rate, 16_000);
    assert.ok(Math.abs(out.length - 16_000) <= 1, `${rate}: ${out.length} samples`);
    const db = gainDb(input, out);
    assert.ok(Math.abs(db) < 0.5, `${freq} Hz from ${rate} Hz: ${db.toFixed(2)} dB`);
  }
  for (const rate of [48_000, 32_000, 96_000]) {
    const db = gainDb(tone(9000, rate, 1), resample(tone(9000, rate, 1), rate, 16_000));
    assert.ok(db <= -40, `9 kHz from ${rate} Hz came out at ${db.toFixed(1)} dB`);
  }
});

test("mixdown averages the channels", () => {
  const mono = mixdown([Float32Array.from([1, 0, 0.5]), Float32Array.from([0, 1, -0.5])]);
  assert.deepEqual([...mono], [0.5, 0.5, 0]);
});

test("§4.4 the 44.1 kHz stereo file decodes to the same 16 kHz mono signal as jfk.wav", async () => {
  const ref = await decodeToMono16k(readFileSync(path.join(modelsDir, "jfk.wav")));
  const stereo = await decodeToMono16k(readFileSync(path.join(modelsDir, "jfk-44k-stereo.wav")));
  assert.equal(stereo.sourceRate, 44_100);
  assert.equal(stereo.sourceChannels, 2);
  assert.equal(stereo.audio.length, ref.audio.length);
  let dot = 0;
  let a2 = 0;
  let b2 = 0;
  for (let i = 0; i < ref.audio.length; i++) {
    dot += ref.audio[i] * stereo.audio[i];
    a2 += ref.audio[i] ** 2;
    b2 += stereo.audio[i] ** 2;
  }
  const correlation = dot / Math.sqrt(a2 * b2);
  assert.ok(correlation > 0.95, `correlation ${correlation.toFixed(3)}`);
});

test("format sniffing by content, not by name", () => {
  const expected: Record<string, string> = {
    "jfk.wav": "wav",
    "jfk.mp3": "mp3",
    "jfk.m4a": "m4a",
    "jfk.webm": "webm",
    "jfk.ogg": "ogg",
    "jfk.flac": "flac",
  };
  for (const [file, format] of Object.entries(expected)) assert.equal(sniffFormat(readFileSync(path.join(modelsDir, file))), format);
  assert.equal(sniffFormat(Buffer.from("GIF89a....")), null);
});

test("§7 bad files are AppError invalid_parameter with param=file", async () => {
  for (const bytes of [new Uint8Array(0), Buffer.from("hello"), readFileSync(path.join(modelsDir, "jfk.m4a")).subarray(0, 30_000)]) {
    await assert.rejects(decodeToMono16k(bytes), (err: unknown) => isAppError(err) && err.code === "invalid_parameter" && err.param === "file");
  }
});

test("§4.4 windows: up to 30 s is one window; silence only is none", () => {
  const frame = defaultWindowOptions.frameSeconds;
  assert.deepEqual(planWindows(new Float32Array(10), 20), [{ start: 0, end: 20, keepFrom: 0, keepTo: 20 }]);
  assert.deepEqual(planWindows(new Float32Array(Math.ceil(60 / frame)), 60), []);
});

test("§4.4 windows: cuts fall inside silences; windows are at most 30 s", () => {
  const frame = defaultWindowOptions.frameSeconds;
  const duration = 100;
  const probs = new Float32Array(Math.ceil(duration / frame));
  // speech 2-20, 21-40 (1 s pause), 45-70 (5 s silence), 72-98
  const speech = [[2, 20], [21, 40], [45, 70], [72, 98]];
  for (const [a, b] of speech) for (let i = Math.floor(a / frame); i < Math.floor(b / frame); i++) probs[i] = 0.9;
  const windows = planWindows(probs, duration);
  const silences = [[0, 2], [20, 21], [40, 45], [70, 72], [98, 100]];
  for (const w of windows) {
    assert.ok(w.end - w.start <= 30 + 1e-9, JSON.stringify(w));
    for (const edge of [w.start, w.end]) {
      assert.ok(silences.some(([a, b]) => edge >= a - 0.05 && edge <= b + 0.05), `edge ${edge} is inside speech: ${JSON.stringify(windows)}`);
    }
  }
  for (const [a, b] of speech) {
    // all speech is covered
    for (let t = a + 0.1; t < b; t += 0.5) assert.ok(windows.some((w) => w.start <= t && t <= w.end), `${t} not covered`);
  }
});

test("§4.4 windows: speech that runs on gets fixed overlapping windows whose kept parts tile the speech", () => {
  const frame = defaultWindowOptions.frameSeconds;
  const duration = 95;
  const probs = new Float32Array(Math.ceil(duration / frame)).fill(0.95);
  const windows = planWindows(probs, duration);
  assert.ok(windows.length >= 4, JSON.stringify(windows));
  for (let i = 0; i < windows.length; i++) {
    const w = windows[i];
    assert.ok(w.end - w.start <= 30, JSON.stringify(w));
    if (i > 0) {
      assert.ok(w.start < windows[i - 1].end, "fixed windows overlap");
      assert.ok(Math.abs(w.keepFrom - windows[i - 1].keepTo) < 1e-9, "kept parts meet");
    }
  }
  assert.equal(windows[0].keepFrom, 0);
  assert.equal(windows.at(-1)!.end, duration);
});

test("§4.4 Silero VAD (real weights): jfk + 5 s silence, 3 times, gives 3 windows cut inside the silences", async () => {
  const jfk = (await decodeToMono16k(readFileSync(path.join(modelsDir, "jfk.wav")))).audio;
  const unit = jfk.length + 5 * 16_000;
  const audio = new Float32Array(unit * 3);
  for (let i = 0; i < 3; i++) audio.set(jfk, i * unit);
  const vad = await SileroVad.create(path.join(modelsDir, "silero_vad.onnx"));
  try {
    const probs = await vad.probabilities(audio);
    assert.equal(probs.length, Math.ceil(audio.length / 512));
    const windows = planWindows(probs, audio.length / 16_000);
    assert.equal(windows.length, 3, JSON.stringify(windows));
    windows.forEach((w, i) => {
      assert.ok(w.start >= (i === 0 ? 0 : i * 16 - 5) && w.start <= i * 16 + 0.5, JSON.stringify(w));
      assert.ok(w.end >= i * 16 + 10.5 && w.end <= i * 16 + 16, JSON.stringify(w));
    });
  } finally {
    await vad.close();
  }
});

test("§7 a WAV claiming an absurd sample rate is 400 param=file, not a resampler blow-up", async () => {
  const wav = Buffer.from(readFileSync(path.join(modelsDir, "jfk.wav")));
  wav.writeUInt32LE(100_000_000, 24);
  wav.writeUInt32LE(200_000_000, 28);
  await assert.rejects(decodeToMono16k(wav), (err: unknown) => isAppError(err) && err.param === "file" && /sample rate/.test(err.message));
});

test("§4.4 windows settled on a partial VAD scan are windows of the whole plan", async () => {
  const { settledWindows } = await import("../src/audio/windows.ts");
  const frame = defaultWindowOptions.frameSeconds;
  const duration = 140;
  const probs = new Float32Array(Math.ceil(duration / frame));
  const speech = [[1, 12], [13.5, 25], [30, 41], [47, 80], [81, 100], [104, 139]];
  for (const [a, b] of speech) for (let i = Math.floor(a / frame); i < Math.floor(b / frame); i++) probs[i] = 0.9;
  const full = planWindows(probs, duration);
  const key = (w: { start: number; end: number }) => `${w.start}-${w.end}`;
  const fullKeys = new Set(full.map(key));
  let settledSomewhere = 0;
  for (let covered = 8; covered < duration; covered += 8) {
    const frames = Math.floor(covered / frame);
    for (const w of settledWindows(probs.subarray(0, frames), frames * frame)) {
      assert.ok(fullKeys.has(key(w)), `settled ${key(w)} at ${covered} s is not in the plan ${[...fullKeys].join(", ")}`);
      settledSomewhere++;
    }
  }
  assert.ok(settledSomewhere > 0);
});
