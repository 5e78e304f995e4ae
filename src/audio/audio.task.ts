import { decodeToMono16k, type DecodedAudio, type DecodeLimits } from "./decode.ts";

/** Decoding uploads in a worker: audio-decode's WASM codecs and the resampler are CPU-bound. */
export function init(): void {}

export async function decode(args: { bytes: Uint8Array; limits: DecodeLimits }): Promise<DecodedAudio> {
  return decodeToMono16k(args.bytes, args.limits);
}
