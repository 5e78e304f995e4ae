import { u32be, type AudioFormat } from "./sniff.ts";

/**
 * What a container says about its audio before anything is decoded: enough to refuse an upload that would decode
 * to more samples than a model accepts, and to reject tables whose size does not fit the file (a decoder would
 * allocate arrays of the declared size).
 */
export interface AudioProbe {
  format: AudioFormat;
  /** The decoder audio-decode registers for it (`wav`, `mp3`, `m4a`, `webm`, `opus`, `oga`, `flac`, `aiff`, `caf`). */
  decoder: string;
  channels: number;
  /** The rate samples come out of the decoder at (Opus always decodes at 48 kHz). */
  sampleRate: number;
  /** Sample frames (per channel) the container declares, or null when it does not say (a live recording). */
  frames: number | null;
  /**
   * FLAC: where to cut the input for the decoder. Its streaming decoder drops frames cut across two pieces, so each
   * piece holds whole frames, and at most about a million samples (a frame of 35 bytes can hold half a million).
   */
  pieceStarts?: number[];
}

export class ProbeError extends Error {}

/** Throws the ProbeError a container's probe refuses an upload with. */
export const fail = (message: string): never => {
  throw new ProbeError(message);
};

export const u16le = (b: Uint8Array, at: number) => b[at] | (b[at + 1] << 8);
export const u16be = (b: Uint8Array, at: number) => (b[at] << 8) | b[at + 1];
export const u64be = (b: Uint8Array, at: number) => u32be(b, at) * 2 ** 32 + u32be(b, at + 4);
export const view = (b: Uint8Array) => new DataView(b.buffer, b.byteOffset, b.byteLength);
