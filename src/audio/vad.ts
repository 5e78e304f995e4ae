import ort from "onnxruntime-node";

/** Silero VAD v5 at 16 kHz: 512-sample frames, each fed with the 64 samples before it as context. */
export const vadFrame = 512;
const contextSize = 64;

export class SileroVad {
  private constructor(private readonly session: ort.InferenceSession) {}

  static async create(modelPath: string, threads = 1): Promise<SileroVad> {
    const session = await ort.InferenceSession.create(modelPath, {
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
      executionProviders: ["cpu"],
    });
    return new SileroVad(session);
  }

  /**
   * Speech probability of every 512-sample frame of 16 kHz mono audio. Long audio is cut into rows of
   * `rowSeconds` run as one batch (each row starts with a fresh state), so the number of model calls
   * stays that of one row whatever the length.
   */
  async probabilities(audio: Float32Array, signal?: AbortSignal, rowSeconds = 8): Promise<Float32Array> {
    const frames = Math.ceil(audio.length / vadFrame);
    const rowFrames = Math.max(1, Math.round((rowSeconds * 16000) / vadFrame));
    const rows = Math.max(1, Math.ceil(frames / rowFrames));
    const out = new Float32Array(frames);
    const width = contextSize + vadFrame;
    let state: ort.Tensor = new ort.Tensor("float32", new Float32Array(2 * rows * 128), [2, rows, 128]);
    const sr = new ort.Tensor("int64", BigInt64Array.from([16000n]), []);
    for (let f = 0; f < rowFrames; f++) {
      if (f % 128 === 0) signal?.throwIfAborted();
      const input = new Float32Array(rows * width);
      for (let r = 0; r < rows; r++) {
        const frame = r * rowFrames + f;
        if (frame >= frames) continue;
        const start = frame * vadFrame;
        // context: the 64 samples before the frame
        if (start > 0) input.set(audio.subarray(start - contextSize, start), r * width);
        input.set(audio.subarray(start, Math.min(start + vadFrame, audio.length)), r * width + contextSize);
      }
      const result = await this.session.run({ input: new ort.Tensor("float32", input, [rows, width]), state, sr });
      const probs = result.output.data as Float32Array;
      for (let r = 0; r < rows; r++) {
        const frame = r * rowFrames + f;
        if (frame < frames) out[frame] = probs[r];
      }
      state = result.stateN as ort.Tensor;
    }
    return out;
  }

  async close(): Promise<void> {
    await this.session.release();
  }
}
