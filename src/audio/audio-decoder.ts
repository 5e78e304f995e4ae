import path from "node:path";
import type { ResourceLimits } from "node:worker_threads";
import { AppError, isAppError } from "../errors/app-error.ts";
import { WorkerCrashedError, WorkerPool } from "../workers/worker-pool.ts";
import type { DecodedAudio, DecodeLimits } from "./decode.ts";

/**
 * The decode worker's heap. Decoded samples live in typed arrays, outside it, bounded by the sample budget instead
 * (decode.ts); the heap holds the container parsers' tables and frames, a few MB for any upload the budget admits.
 */
export const decodeWorkerLimits: ResourceLimits = { maxOldGenerationSizeMb: 256, maxYoungGenerationSizeMb: 32 };

/**
 * Decodes uploads off the event loop: a small worker pool (src/workers) running audio/audio.task.ts.
 * Workers start on first use and an idle one does not keep the process alive.
 */
export class AudioDecoder {
  private readonly pool: WorkerPool;

  constructor(size = 1, resourceLimits: ResourceLimits = decodeWorkerLimits) {
    this.pool = new WorkerPool({
      size,
      taskModule: path.join(import.meta.dirname, "audio.task.ts"),
      init: null,
      name: "audio",
      resourceLimits,
    });
  }

  /** 16 kHz mono; every failure to decode is 400 invalid_parameter, param "file". */
  async decode(bytes: Uint8Array, signal: AbortSignal, limits: DecodeLimits): Promise<DecodedAudio> {
    // Copy into an own buffer so it can be transferred (upload chunks share Node's pool).
    const own = new Uint8Array(bytes.length);
    own.set(bytes);
    try {
      return await this.pool.call<DecodedAudio>("decode", { bytes: own, limits }, { signal, transfer: [own.buffer] });
    } catch (err) {
      if (isAppError(err) || signal.aborted) throw err;
      const outOfMemory = (err instanceof WorkerCrashedError && err.outOfMemory) || (err as NodeJS.ErrnoException).code === "ERR_WORKER_OUT_OF_MEMORY";
      const message = outOfMemory ? "The uploaded file needs more memory to decode than the server allows." : `The uploaded file could not be decoded: ${(err as Error).message}.`;
      throw new AppError("invalid_parameter", { param: "file", message, cause: err });
    }
  }

  async close(): Promise<void> {
    await this.pool.close();
  }
}
