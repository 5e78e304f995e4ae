import { SileroVad } from "../../../audio/vad.ts";
import type { TaskContext } from "../worker-protocol.ts";

/**
 * Silero VAD in a worker: speech probabilities per 512-sample frame. Also re-exported by whisper.task.ts,
 * so an engine's whisper workers can window long audio without a pool of their own.
 */
export interface VadInit {
  vadModel: string | null;
  threads?: number;
}

/** One VAD per worker thread (a task module is loaded once per worker). */
const holder: { vad: SileroVad | null } = { vad: null };

export async function initVad(arg: VadInit): Promise<void> {
  holder.vad = arg.vadModel ? await SileroVad.create(arg.vadModel, arg.threads ?? 1) : null;
}

export async function init(arg: VadInit): Promise<void> {
  await initVad(arg);
}

export async function vadProbabilities(args: { audio: Float32Array }, ctx?: TaskContext): Promise<Float32Array | null> {
  if (!holder.vad) return null;
  return holder.vad.probabilities(args.audio, ctx?.signal);
}
