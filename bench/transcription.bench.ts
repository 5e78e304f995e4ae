import { readFileSync } from "node:fs";
import path from "node:path";
import decode from "audio-decode";
import { pipeline } from "@huggingface/transformers";
import { AudioDecoder } from "../src/audio/audio-decoder.ts";
import { decodeToMono16k } from "../src/audio/decode.ts";
import { startServer, modelsDir } from "../harness/server.ts";
import { median, ratioRow, type BenchRow } from "./bench-row.ts";
import { repeatedJfk } from "../harness/audio.ts";

const RUNS = 5;
const whisperDir = path.join(modelsDir, "forged/whisper-scripted");


async function timed(fn: () => Promise<unknown>): Promise<number> {
  const started = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - started) / 1e9;
}

/**
 * Real-time factor (audio seconds per wall second) of POST /v1/audio/transcriptions on the scripted whisper
 * (HTTPS upload, decode in a worker, Silero VAD, windows in a worker, parallel 1, 1 thread; parallel 2 only adds
 * contention on a 2-core box) against the raw
 * transformers.js pipeline in-process (chunk_length_s 30, timestamps) on the same 64 s recording; and
 * decode+resample throughput of a 10-minute mp3 (jfk.mp3 repeated) in the service's decode worker against
 * audio-decode alone in-process.
 */
export default async function transcriptionBench(): Promise<BenchRow[]> {
  const wav = repeatedJfk(4, 5);
  const audioSeconds = (wav.length - 44) / 32000;
  const rows: BenchRow[] = [];

  // The forged model is tiny, so both stay loaded and the runs alternate: load swings on a shared box then hit
  // raw and service alike.
  const audio = (await decodeToMono16k(wav)).audio;
  const asr = await pipeline("automatic-speech-recognition", whisperDir, {
    dtype: "fp32",
    device: "cpu",
    local_files_only: true,
    session_options: { intraOpNumThreads: 1, interOpNumThreads: 1 },
  });
  const runRaw = () => asr(audio, { chunk_length_s: 30, stride_length_s: 5, return_timestamps: true, language: "en" } as never);
  const srv = await startServer({
    logLevel: "error",
    models: [{ id: "whisper", engine: "onnx", source: whisperDir, capabilities: ["transcriptions"], threads: 1, parallel: 1 }],
  });
  const rawTimes: number[] = [];
  const serviceTimes: number[] = [];
  try {
    const { key } = await srv.createKey();
    const runService = async () => {
      const form = new FormData();
      form.append("file", new Blob([new Uint8Array(wav)]), "long.wav");
      form.append("model", "whisper");
      form.append("language", "en");
      form.append("response_format", "verbose_json");
      const res = await srv.fetch(`${srv.baseURL}/audio/transcriptions`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: form });
      const body = (await res.json()) as { segments?: unknown[] };
      if (res.status !== 200 || body.segments?.length !== 12) throw new Error(`transcription failed: ${res.status} ${JSON.stringify(body)}`);
    };
    await runRaw();
    await runService();
    for (let i = 0; i < RUNS; i++) {
      rawTimes.push(await timed(runRaw));
      serviceTimes.push(await timed(runService));
    }
  } finally {
    await srv.close();
    await asr.dispose();
  }
  const serviceRtf = audioSeconds / median(serviceTimes);
  const rawRtf = audioSeconds / median(rawTimes);
  rows.push(
    ratioRow({
      item: `transcription RTF, ${audioSeconds} s wav, scripted whisper, parallel 1 (HTTPS+decode+VAD vs pipeline)`,
      service: serviceRtf,
      raw: rawRtf,
      unit: "audio s/s",
      target: ">= 0.9",
    }),
  );

  // 10-minute mp3: MPEG audio frames concatenate, so the file bytes repeated make one long stream.
  const mp3One = readFileSync(path.join(modelsDir, "jfk.mp3"));
  const mp3 = Buffer.concat(Array.from({ length: 55 }, () => mp3One));
  const decoder = new AudioDecoder(1);
  const decodeTimes: number[] = [];
  const rawDecodeTimes: number[] = [];
  let seconds = 0;
  try {
    const signal = new AbortController().signal;
    seconds = (await decoder.decode(mp3, signal, { maxSeconds: 7200 })).duration;
    for (let i = 0; i < 3; i++) {
      decodeTimes.push(await timed(() => decoder.decode(mp3, signal, { maxSeconds: 7200 })));
      rawDecodeTimes.push(await timed(() => decode(new Uint8Array(mp3))));
    }
  } finally {
    await decoder.close();
  }
  const svc = seconds / median(decodeTimes);
  const raw = seconds / median(rawDecodeTimes);
  rows.push(ratioRow({ item: `decode+resample ${Math.round(seconds)} s mp3 (worker vs audio-decode in-process)`, service: svc, raw, unit: "audio s/s", target: "report" }));
  return rows;
}
