/**
 * Container sniffing and truncation checks. audio-decode decodes what it can of a cut-off file and
 * returns it without complaint; these checks compare what a container declares with what arrived, so
 * a truncated upload is reported as such instead of being transcribed in part.
 */

export type AudioFormat = "wav" | "mp3" | "m4a" | "webm" | "ogg" | "flac" | "aiff" | "caf";

export const ascii = (b: Uint8Array, at: number, s: string) => {
  if (b.length < at + s.length) return false;
  for (let i = 0; i < s.length; i++) if (b[at + i] !== s.charCodeAt(i)) return false;
  return true;
};

/** Skips an ID3v2 tag; returns the offset of the first byte after it. */
export function skipId3(b: Uint8Array): number {
  if (!ascii(b, 0, "ID3") || b.length < 10) return 0;
  const size = ((b[6] & 0x7f) << 21) | ((b[7] & 0x7f) << 14) | ((b[8] & 0x7f) << 7) | (b[9] & 0x7f);
  return 10 + size + (b[5] & 0x10 ? 10 : 0);
}

const mpegBitrates: Record<string, number[]> = {
  // [version][layer] tables, kbps; index 0 = free, 15 = bad
  "1-3": [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],
  "1-2": [0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384],
  "1-1": [0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448],
  "2-3": [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
  "2-2": [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
  "2-1": [0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256],
};
const mpegRates: Record<number, number[]> = { 3: [44100, 48000, 32000], 2: [22050, 24000, 16000], 0: [11025, 12000, 8000] };

/** The MPEG audio frame at `at` (its length in bytes, samples per channel, channels, rate), or null. */
export function mpegFrameInfo(b: Uint8Array, at: number): { length: number; samples: number; channels: number; rate: number } | null {
  if (at + 4 > b.length || b[at] !== 0xff || (b[at + 1] & 0xe0) !== 0xe0) return null;
  const versionBits = (b[at + 1] >> 3) & 3; // 3 = MPEG1, 2 = MPEG2, 0 = MPEG2.5
  const layerBits = (b[at + 1] >> 1) & 3; // 3 = layer I, 2 = II, 1 = III
  if (versionBits === 1 || layerBits === 0) return null;
  const bitrateIndex = b[at + 2] >> 4;
  const rateIndex = (b[at + 2] >> 2) & 3;
  if (bitrateIndex === 0 || bitrateIndex === 15 || rateIndex === 3) return null;
  const layer = 4 - layerBits;
  const version = versionBits === 3 ? 1 : 2;
  const bitrate = mpegBitrates[`${version}-${layer}`][bitrateIndex] * 1000;
  const rate = mpegRates[versionBits][rateIndex];
  const padding = (b[at + 2] >> 1) & 1;
  const channels = b[at + 3] >> 6 === 3 ? 1 : 2;
  if (layer === 1) return { length: (Math.floor((12 * bitrate) / rate) + padding) * 4, samples: 384, channels, rate };
  const samples = layer === 3 && version === 2 ? 576 : 1152;
  return { length: Math.floor((samples / 8) * bitrate / rate) + padding, samples, channels, rate };
}

/** Length in bytes of the MPEG audio frame at `at`, or 0 when there is no valid header there. */
const mpegFrameLength = (b: Uint8Array, at: number): number => mpegFrameInfo(b, at)?.length ?? 0;

export function sniffFormat(b: Uint8Array): AudioFormat | null {
  if (ascii(b, 0, "RIFF") && ascii(b, 8, "WAVE")) return "wav";
  if (ascii(b, 0, "fLaC")) return "flac";
  if (ascii(b, 0, "OggS")) return "ogg";
  if (b.length >= 4 && b[0] === 0x1a && b[1] === 0x45 && b[2] === 0xdf && b[3] === 0xa3) return "webm";
  if (ascii(b, 4, "ftyp")) return "m4a";
  if (ascii(b, 0, "FORM") && (ascii(b, 8, "AIFF") || ascii(b, 8, "AIFC"))) return "aiff";
  if (ascii(b, 0, "caff")) return "caf";
  const start = skipId3(b);
  if (start > 0 && start <= b.length) return "mp3";
  if (mpegFrameLength(b, 0) > 0) return "mp3";
  return null;
}

export const u32be = (b: Uint8Array, at: number) => ((b[at] << 24) >>> 0) + (b[at + 1] << 16) + (b[at + 2] << 8) + b[at + 3];
export const u32le = (b: Uint8Array, at: number) => b[at] + (b[at + 1] << 8) + (b[at + 2] << 16) + ((b[at + 3] << 24) >>> 0);

/**
 * Returns why the file looks cut off, or null when its container is complete (as far as cheap checks go).
 * `decodedFrames` is the number of sample frames the decoder produced (for FLAC's declared total).
 */
export function truncationProblem(b: Uint8Array, format: AudioFormat, decodedFrames: number): string | null {
  switch (format) {
    case "wav": {
      // Walk the chunks: a chunk declaring more bytes than remain means the upload was cut.
      let at = 12;
      while (at + 8 <= b.length) {
        const id = String.fromCharCode(b[at], b[at + 1], b[at + 2], b[at + 3]);
        const size = u32le(b, at + 4);
        if (id === "data" && size !== 0xffffffff && at + 8 + size > b.length) {
          return `the WAV data chunk declares ${size} bytes but only ${b.length - at - 8} are present`;
        }
        if (id === "data") return null;
        at += 8 + size + (size & 1);
      }
      return "the WAV file ends before its data chunk";
    }
    case "flac": {
      // STREAMINFO (the first metadata block) holds the total number of samples in 36 bits.
      if (b.length < 42) return "the FLAC stream ends inside its header";
      const total = (b[21] & 0x0f) * 2 ** 32 + u32be(b, 22);
      if (total > 0 && decodedFrames < total - 4608) {
        return `the FLAC header declares ${total} samples but only ${decodedFrames} could be decoded`;
      }
      return null;
    }
    case "ogg": {
      // Pages must be whole and the last one must carry the end-of-stream flag.
      let at = 0;
      let lastFlags = 0;
      while (at + 27 <= b.length && ascii(b, at, "OggS")) {
        const segments = b[at + 26];
        if (at + 27 + segments > b.length) return "the Ogg stream ends inside a page header";
        let body = 0;
        for (let i = 0; i < segments; i++) body += b[at + 27 + i];
        const end = at + 27 + segments + body;
        if (end > b.length) return "the Ogg stream ends inside a page";
        lastFlags = b[at + 5];
        at = end;
      }
      if (!(lastFlags & 0x04)) return "the Ogg stream has no end-of-stream page";
      return null;
    }
    case "m4a": {
      // Top-level boxes must fit; the moov box (index) may come last, as phones write it.
      let at = 0;
      let sawMoov = false;
      while (at + 8 <= b.length) {
        let size = u32be(b, at);
        const type = String.fromCharCode(b[at + 4], b[at + 5], b[at + 6], b[at + 7]);
        if (size === 1 && at + 16 <= b.length) size = u32be(b, at + 8) * 2 ** 32 + u32be(b, at + 12);
        if (size === 0) size = b.length - at;
        if (size < 8) return "the MP4 container has a malformed box";
        if (at + size > b.length) return `the MP4 '${type}' box declares ${size} bytes but only ${b.length - at} are present`;
        if (type === "moov") sawMoov = true;
        at += size;
      }
      if (!sawMoov) return "the MP4 container has no 'moov' index (the upload is probably cut off)";
      return null;
    }
    case "webm": {
      // The Segment element's declared size (when known) must fit in the file.
      const header = readEbmlElement(b, 0);
      if (!header) return "the WebM file ends inside its header";
      if (header.size === null) return null;
      const segment = readEbmlElement(b, header.dataStart + header.size);
      if (!segment) return "the WebM file ends before its Segment";
      if (segment.size !== null && segment.dataStart + segment.size > b.length) {
        return `the WebM Segment declares ${segment.size} bytes but only ${b.length - segment.dataStart} are present`;
      }
      return null;
    }
    case "mp3": {
      // Walk the frames from the first sync: the last one must be complete.
      let at = skipId3(b);
      let frames = 0;
      while (at < b.length) {
        const len = mpegFrameLength(b, at);
        if (len === 0) break; // trailing tags (ID3v1, APE) or junk
        if (at + len > b.length) return `the MP3 stream ends inside frame ${frames + 1}`;
        frames++;
        at += len;
      }
      return null;
    }
    default:
      return null;
  }
}

interface EbmlElement {
  id: number;
  dataStart: number;
  /** null = unknown size (live streams). */
  size: number | null;
}

function readVint(b: Uint8Array, at: number, keepMarker: boolean): { value: number; length: number; allOnes: boolean } | null {
  if (at >= b.length) return null;
  const first = b[at];
  let length = 1;
  while (length <= 8 && !(first & (0x80 >> (length - 1)))) length++;
  if (length > 8 || at + length > b.length) return null;
  let value = keepMarker ? first : first & (0xff >> length);
  let allOnes = (first & (0xff >> length)) === 0xff >> length;
  for (let i = 1; i < length; i++) {
    value = value * 256 + b[at + i];
    if (b[at + i] !== 0xff) allOnes = false;
  }
  return { value, length, allOnes };
}

export function readEbmlElement(b: Uint8Array, at: number): EbmlElement | null {
  const id = readVint(b, at, true);
  if (!id) return null;
  const size = readVint(b, at + id.length, false);
  if (!size) return null;
  return { id: id.value, dataStart: at + id.length + size.length, size: size.allOnes ? null : size.value };
}
