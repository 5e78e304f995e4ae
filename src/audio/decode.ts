import decode from "audio-decode";
import { AppError } from "../errors/app-error.ts";
import { moovFirst } from "./mp4-faststart.ts";
import { probeAudio, ProbeError, type AudioProbe } from "./probe.ts";
import { mp4Boxes } from "./probe-mp4.ts";
import { StreamingResampler } from "./resample.ts";
import { sniffFormat, truncationProblem, type AudioFormat } from "./sniff.ts";

export const targetRate = 16_000;
/** The default of a model's `limits.maxAudioSeconds` (config/load-config.ts): two hours (460 MB of 16 kHz floats). */
export const defaultMaxAudioSeconds = 2 * 60 * 60;
/**
 * Samples (frames × channels) a file may decode to per second of `maxAudioSeconds`: what a 48 kHz stereo recording
 * makes. Decoding costs in samples, not seconds: 8 channels at 384 kHz make 32 times as many per second.
 */
export const samplesPerAllowedSecond = 48_000 * 2;

export interface DecodeLimits {
  /** The longest recording, in seconds; its samples budget is `samplesPerAllowedSecond` times this. */
  maxSeconds: number;
}

export interface DecodedAudio {
  /** 16 kHz mono PCM. */
  audio: Float32Array;
  /** Seconds. */
  duration: number;
  format: AudioFormat;
  sourceRate: number;
  sourceChannels: number;
}

const supported = "wav, mp3, m4a/AAC, webm/Opus, ogg/Vorbis/Opus or flac";

function badFile(message: string, cause?: unknown): AppError {
  return new AppError("invalid_parameter", { param: "file", message, cause });
}

/**
 * Bytes fed to the decoder per call. A call's output is bounded by what its input can expand to: a FLAC frame of
 * 35 bytes can hold 65,535 samples on 8 channels, so 1 KiB decodes to at most about 60 MB. PCM expands at most 32
 * times (8-bit), so it goes in larger pieces.
 */
function pieceBytes(format: AudioFormat): number {
  return format === "wav" || format === "aiff" ? 64 * 1024 : 1024;
}

/**
 * Bytes the decoder needs before it can yield anything (the WAV header, the MP4 index), given in its first call:
 * decoders join a pending header with every new piece, which, piece by piece, would copy it over and over.
 */
function headerBytes(input: Uint8Array, format: AudioFormat): number {
  if (format === "m4a") return mp4Boxes(input, 0, input.length).find((box) => box.type === "moov")?.end ?? 0;
  if (format !== "wav") return 0;
  let at = 12;
  while (at + 8 <= input.length) {
    const size = input[at + 4] | (input[at + 5] << 8) | (input[at + 6] << 16) | ((input[at + 7] << 24) >>> 0);
    if (String.fromCharCode(input[at], input[at + 1], input[at + 2], input[at + 3]) === "data") return at + 8;
    at += 8 + size + (size & 1);
  }
  return 0;
}

const minutes = (seconds: number) => (seconds < 120 ? `${Math.round(seconds)} seconds` : `${Math.round(seconds / 60)} minutes`);

/** Refuses what the container declares beyond the limits, before anything is decoded. */
function checkDeclared(probe: AudioProbe, limits: DecodeLimits): void {
  const { format, channels, sampleRate: rate, frames } = probe;
  if (channels < 1) throw badFile(`The uploaded ${format} file declares no audio channels.`);
  if (rate < 1000 || rate > 384_000) {
    throw badFile(`The uploaded ${format} file has an unsupported sample rate of ${rate} Hz (1 kHz to 384 kHz).`);
  }
  if (frames === null) return;
  if (frames / rate > limits.maxSeconds) {
    throw badFile(`The uploaded audio is ${minutes(frames / rate)} long; the limit is ${minutes(limits.maxSeconds)}.`);
  }
  overBudget(frames * channels, channels, rate, limits, "declares");
}

function overBudget(samples: number, channels: number, rate: number, limits: DecodeLimits, verb: string): void {
  const budget = limits.maxSeconds * samplesPerAllowedSecond;
  if (samples <= budget) return;
  throw badFile(
    `The uploaded audio ${verb} ${samples} samples (${channels} channels at ${rate} Hz); the limit is ${budget} ` +
      `(${minutes(limits.maxSeconds)} of 48 kHz stereo).`,
  );
}

/** A growing 16 kHz output, sized from the declared length when there is one. */
class Output {
  private data: Float32Array;
  length = 0;
  constructor(expected: number) {
    this.data = new Float32Array(Math.max(16_000, expected));
  }
  append(piece: Float32Array): void {
    if (this.length + piece.length > this.data.length) {
      const grown = new Float32Array(Math.max(this.length + piece.length, this.data.length * 2));
      grown.set(this.data.subarray(0, this.length));
      this.data = grown;
    }
    this.data.set(piece, this.length);
    this.length += piece.length;
  }
  result(): Float32Array {
    return this.data.slice(0, this.length);
  }
}

/** The byte ranges fed to the decoder, one call each: the header at once, then small pieces (FLAC: see the probe). */
function* pieces(input: Uint8Array, format: AudioFormat, probe: AudioProbe): Generator<[number, number]> {
  const size = pieceBytes(format);
  if (probe.pieceStarts) {
    let from = 0;
    for (const start of probe.pieceStarts) {
      if (start > from) yield [from, start];
      from = start;
    }
    yield [from, input.length];
    return;
  }
  const head = Math.max(size, headerBytes(input, format));
  yield [0, head];
  for (let at = head; at < input.length; at += size) yield [at, Math.min(input.length, at + size)];
}

type StreamDecoder = ((chunk?: Uint8Array) => Promise<{ channelData: Float32Array[]; sampleRate: number }>) & { free(): void };

/**
 * Decodes an uploaded audio file of any supported format and rate to 16 kHz mono. Every problem with the file itself
 * becomes 400 invalid_parameter (param "file") saying what was wrong; it never throws anything else for bad input.
 *
 * Memory and time are bounded before and while decoding: the container's declared channels, rate and length are
 * checked against the limits first; then the file is decoded in small pieces, each mixed down and resampled at once
 * (the recording is never held at its source rate), and decoding stops as soon as what came out passes the limits,
 * whatever the container said. CPU-heavy: call it from a worker thread (see audio/audio-decoder.ts).
 */
export async function decodeToMono16k(bytes: Uint8Array, limits: DecodeLimits = { maxSeconds: defaultMaxAudioSeconds }): Promise<DecodedAudio> {
  if (bytes.length === 0) throw badFile("The uploaded file is empty.");
  const format = sniffFormat(bytes);
  if (!format) throw badFile(`The uploaded file is not in a recognised audio format; supported: ${supported}.`);
  let probe: AudioProbe;
  try {
    probe = probeAudio(bytes, format);
  } catch (err) {
    if (!(err instanceof ProbeError)) throw err;
    const truncated = truncationProblem(bytes, format, 0);
    throw badFile(truncated ? `The uploaded ${format} file is truncated: ${truncated}.` : `The uploaded ${format} file cannot be read: ${err.message}.`, err);
  }
  checkDeclared(probe, limits);

  const input = format === "m4a" ? (moovFirst(bytes) ?? bytes) : bytes;
  const output = new Output(probe.frames === null ? 0 : Math.ceil((probe.frames * targetRate) / probe.sampleRate) + targetRate);
  let resampler: StreamingResampler | null = null;
  let frames = 0;
  let samples = 0;
  let channels = 0;

  const take = (piece: { channelData: Float32Array[]; sampleRate: number }) => {
    const present = (piece?.channelData ?? []).filter((c) => c && c.length > 0);
    if (present.length === 0) return;
    const length = Math.min(...present.map((c) => c.length));
    const rate = piece.sampleRate;
    if (rate < 1000 || rate > 384_000) throw badFile(`The uploaded ${format} file has an unsupported sample rate of ${rate} Hz (1 kHz to 384 kHz).`);
    resampler ??= new StreamingResampler(rate, targetRate);
    if (rate !== resampler.fromRate) throw badFile(`The uploaded ${format} file changes its sample rate from ${resampler.fromRate} Hz to ${rate} Hz.`);
    frames += length;
    samples += length * present.length;
    channels = Math.max(channels, present.length);
    if (frames / rate > limits.maxSeconds) {
      throw badFile(`The uploaded audio is longer than ${minutes(limits.maxSeconds)}, the limit.`);
    }
    overBudget(samples, channels, rate, limits, "decodes to more than");
    const mono = new Float32Array(length);
    for (const channel of present) {
      for (let i = 0; i < length; i++) {
        const v = channel[i];
        if (!Number.isFinite(v)) throw badFile(`The uploaded ${format} file decodes to invalid samples.`);
        mono[i] += v;
      }
    }
    if (present.length > 1) for (let i = 0; i < length; i++) mono[i] /= present.length;
    output.append(resampler.push(mono));
  };

  let decoder: StreamDecoder | null = null;
  try {
    decoder = (await (decode as unknown as Record<string, () => Promise<StreamDecoder>>)[probe.decoder]()) as StreamDecoder;
    for (const [from, to] of pieces(input, format, probe)) take(await decoder(input.subarray(from, to)));
    const last = decoder;
    decoder = null;
    take(await last());
  } catch (err) {
    decoder?.free();
    if (err instanceof AppError) throw err;
    const reason = (err as Error)?.message ?? String(err);
    const truncated = truncationProblem(bytes, format, 0);
    if (truncated) throw badFile(`The uploaded ${format} file is truncated: ${truncated}.`, err);
    throw badFile(`The uploaded ${format} file could not be decoded: ${reason}.`, err);
  }
  const truncated = truncationProblem(bytes, format, frames);
  if (truncated) throw badFile(`The uploaded ${format} file is truncated: ${truncated}.`);
  if (frames === 0 || !resampler) throw badFile(`The uploaded ${format} file contains no audio samples (it is empty or cut off).`);
  output.append((resampler as StreamingResampler).end());
  const audio = output.result();
  return { audio, duration: audio.length / targetRate, format, sourceRate: (resampler as StreamingResampler).fromRate, sourceChannels: channels };
}
