import { existsSync } from "node:fs";
import path from "node:path";
import pLimit from "p-limit";
import type { ModelEntry } from "../../config/app-config.ts";
import { AppError } from "../../errors/app-error.ts";
import { fixedWindows, maxWindowSeconds, planWindows, sampleRate, settledWindows, vadFrame, type AudioWindow } from "../../audio/windows.ts";
import { AudioDecoder } from "../../audio/audio-decoder.ts";
import type {
  Engine,
  PreparedTranscription,
  TranscribePort,
  TranscribeRequest,
  Transcript,
  TranscriptSegment,
} from "../engine.ts";
import type { WorkerPool } from "../../workers/worker-pool.ts";
import { onnxPool } from "./onnx-pool.ts";
import { onnxOptions, whisperSupport } from "./onnx.support.ts";
import type { WhisperInit, WindowResult } from "./tasks/whisper.task.ts";

/** A transcript plus how many windows it was cut into. */
export interface WhisperTranscript extends Transcript {
  windows: number;
}

/**
 * Where the Silero VAD weights are: MODELGATE_VAD_MODEL, else silero_vad.onnx next to the model folder or up to
 * two levels above it (a models directory holding both), else a pulled onnx-community/silero-vad beside it.
 * Without one, long audio is cut into fixed overlapping windows instead of at silences.
 */
export function findVadModel(modelPath: string | null, envPath = process.env.MODELGATE_VAD_MODEL): string | null {
  if (envPath) return existsSync(envPath) ? path.resolve(envPath) : null;
  if (!modelPath) return null;
  const candidates = [
    path.join(modelPath, "silero_vad.onnx"),
    path.join(modelPath, "..", "silero_vad.onnx"),
    path.join(modelPath, "..", "..", "silero_vad.onnx"),
    path.join(modelPath, "..", "silero-vad", "onnx", "model.onnx"),
    path.join(modelPath, "..", "..", "onnx-community", "silero-vad", "onnx", "model.onnx"),
  ];
  return candidates.find((c) => existsSync(c)) ?? null;
}

const round2 = (x: number) => Math.round(x * 100) / 100;

/**
 * Waits until no call is running in the pool's workers, aborted ones included (they finish their current
 * ONNX run first). Terminating a worker inside a native onnxruntime run aborts the whole process.
 */
async function settle(pool: WorkerPool, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (pool.load().some((n) => n > 0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
}

/**
 * Whisper (transformers.js layout) in worker threads. Audio longer than one window is cut by Silero VAD (on a
 * thread of its own) at silences into windows of at most 30 s; windows start as soon as the scan has settled
 * them and run in parallel up to the model's `parallel`; their segments are put back on the recording's
 * timeline. Language is detected on the first window when not given.
 */
export class OnnxWhisperEngine implements Engine, TranscribePort {
  readonly support = whisperSupport;
  readonly contextSize = null;
  private pool: WorkerPool | null = null;
  /** Silero VAD on a thread of its own; null when no VAD model is found (fixed windows then). */
  private vadPool: WorkerPool | null = null;
  private readonly vadModel: string | null;
  /** Decodes uploads in a worker of its own; started on the first upload. */
  private decoder: AudioDecoder | null = null;
  /** Why the VAD did not start, if it did not. */
  vadError: string | null = null;

  constructor(private readonly entry: ModelEntry) {
    this.vadModel = findVadModel(entry.path);
  }

  async load(): Promise<void> {
    if (this.pool) return;
    if (!this.entry.path) throw new Error(`model '${this.entry.id}' has no local path`);
    const init: WhisperInit = { path: this.entry.path, dtype: this.entry.dtype, threads: onnxOptions(this.entry).threads };
    const pool = onnxPool("whisper.task.ts", this.entry.parallel, init);
    const vadPool = this.vadModel
      ? onnxPool("vad.task.ts", 1, { vadModel: this.vadModel, threads: 1 })
      : null;
    // A VAD that will not load costs the silence cuts, not the model: long audio then gets fixed windows.
    const vadStarted = vadPool?.start().then(
      () => true,
      (err: unknown) => {
        this.vadError = (err as Error).message;
        return false;
      },
    );
    try {
      await pool.start();
    } catch (err) {
      await Promise.all([pool.close(), vadStarted, vadPool?.close()]);
      throw err;
    }
    this.pool = pool;
    this.vadPool = (await vadStarted) ? vadPool : null;
  }

  async unload(): Promise<void> {
    const decoder = this.decoder;
    this.decoder = null;
    await decoder?.close();
    const pools = [this.pool, this.vadPool];
    this.pool = null;
    this.vadPool = null;
    await Promise.all(pools.map(async (p) => {
      if (!p) return;
      await settle(p);
      await p.close();
    }));
  }

  /** Decodes the upload off the event loop (400 param file when it is not audio, or holds none). */
  async prepareTranscribe(req: TranscribeRequest, signal: AbortSignal): Promise<PreparedTranscription> {
    this.decoder ??= new AudioDecoder(1);
    const { audio, duration } = await this.decoder.decode(req.file.bytes, signal, { maxSeconds: this.entry.limits.maxAudioSeconds });
    if (audio.length === 0) throw new AppError("invalid_parameter", { param: "file", message: "The uploaded file contains no audio." });
    return { audio, windows: Math.ceil(duration / maxWindowSeconds) };
  }

  /** The transcription worker pool's own counts (calls in its workers now, and the most ever at once). */
  poolStats(): { inFlight: number; peakInFlight: number } {
    const pool = this.requirePool();
    return { inFlight: pool.inFlight, peakInFlight: pool.peakInFlight };
  }

  /**
   * The windows a recording is cut into. `onSettled` gets windows that are already certain while the VAD is
   * still scanning the rest, so they can start early; the returned list is the whole plan.
   */
  async windows(audio: Float32Array, signal: AbortSignal, onSettled?: (w: AudioWindow) => void): Promise<AudioWindow[]> {
    const duration = audio.length / sampleRate;
    if (duration <= maxWindowSeconds) return [{ start: 0, end: duration, keepFrom: 0, keepTo: duration }];
    if (!this.vadPool) return fixedWindows(duration);
    const frames = new Float32Array(Math.ceil(audio.length / vadFrame));
    const probs = await this.vadPool.call<Float32Array | null>("vadProbabilities", { audio }, {
      signal,
      onEvent: (value) => {
        const { fromFrame, probs: block } = value as { fromFrame: number; probs: Float32Array };
        frames.set(block, fromFrame);
        const scanned = fromFrame + block.length;
        if (!onSettled || scanned >= frames.length) return;
        for (const w of settledWindows(frames.subarray(0, scanned), (scanned * vadFrame) / sampleRate)) onSettled(w);
      },
    });
    return probs ? planWindows(probs, duration) : fixedWindows(duration);
  }

  /**
   * Runs the windows of one recording, at most `slots` at once: the scheduler leased that many of the model's
   * `parallel` slots for this request, so windows of all requests together never exceed `parallel`.
   */
  async transcribe(req: TranscribeRequest, prepared: PreparedTranscription, signal: AbortSignal, slots: number): Promise<WhisperTranscript> {
    const pool = this.requirePool();
    const recording = prepared.audio!;
    const duration = recording.length / sampleRate;
    const limit = pLimit(Math.max(1, slots));

    let resolveLanguage!: (code: string) => void;
    let rejectLanguage!: (err: unknown) => void;
    const language = new Promise<string>((resolve, reject) => {
      resolveLanguage = resolve;
      rejectLanguage = reject;
    });
    language.catch(() => {});
    if (req.language) resolveLanguage(req.language);

    // The first window started detects the language (when not given); the others wait for it.
    const started = new Map<string, Promise<WindowResult>>();
    const runWindow = async (window: AudioWindow, first: boolean, lang: string | null): Promise<WindowResult> => {
      signal.throwIfAborted();
      try {
        const audio = recording.slice(Math.floor(window.start * sampleRate), Math.ceil(window.end * sampleRate));
        const result = await pool.call<WindowResult>(
          "transcribeWindow",
          { audio, language: lang, prompt: req.prompt, temperature: req.temperature },
          {
            signal,
            transfer: [audio.buffer],
            onEvent: (value) => resolveLanguage((value as { language: string }).language),
          },
        );
        if (first) resolveLanguage(result.language);
        return result;
      } catch (err) {
        if (first) rejectLanguage(err);
        throw err;
      }
    };
    const start = (window: AudioWindow): Promise<WindowResult> => {
      const key = `${window.start}-${window.end}`;
      let running = started.get(key);
      if (!running) {
        const first = started.size === 0;
        // Later windows wait for the language before taking one of the request's slots, not while holding it.
        running = (first ? Promise.resolve(req.language) : language).then((lang) => limit(() => runWindow(window, first, lang)));
        running.catch(() => {});
        started.set(key, running);
      }
      return running;
    };

    let windows: AudioWindow[];
    try {
      windows = await this.windows(recording, signal, start);
    } catch (err) {
      await Promise.allSettled(started.values());
      throw err;
    }
    if (windows.length === 0) {
      // Silence only: nothing to transcribe, but a language is still reported.
      let code = req.language;
      if (!code) {
        const head = recording.slice(0, maxWindowSeconds * sampleRate);
        code = (await pool.call<{ language: string }>("detectLanguage", { audio: head }, { signal, transfer: [head.buffer] })).language;
      }
      return { text: "", language: code, duration, segments: [], completionTokens: 0, windows: 0 };
    }

    const results = await Promise.all(windows.map(start));
    const segments: TranscriptSegment[] = [];
    let tokens = 0;
    results.forEach((result, k) => {
      const window = windows[k];
      tokens += result.tokens;
      for (const seg of result.segments) {
        const hi = Math.min(window.end, duration);
        const from = Math.min(Math.max(window.start + seg.start, window.start, 0), hi);
        const to = Math.min(Math.max(window.start + seg.end, from), hi);
        const middle = (from + to) / 2;
        // Overlapping fixed windows: each keeps the segments whose middle falls in its own part.
        if (middle < window.keepFrom || (middle >= window.keepTo && window.keepTo < window.end)) continue;
        segments.push({ id: 0, start: round2(from), end: round2(to), text: seg.text });
      }
    });
    segments.sort((a, b) => a.start - b.start || a.end - b.end);
    segments.forEach((s, i) => (s.id = i));
    return {
      text: segments.map((s) => s.text).join("").trim(),
      language: await language.catch(() => results[0].language),
      duration,
      segments,
      completionTokens: tokens,
      windows: windows.length,
    };
  }

  private requirePool(): WorkerPool {
    if (!this.pool) throw new AppError("model_loading", { message: `The model '${this.entry.id}' is not loaded.`, retryAfterMs: 1000 });
    return this.pool;
  }
}
