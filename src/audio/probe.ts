import { ascii, mpegFrameInfo, skipId3, u32be, u32le, type AudioFormat } from "./sniff.ts";
import { fail, u16be, u16le, u64be, view, type AudioProbe } from "./probe-common.ts";
import { probeMp4 } from "./probe-mp4.ts";
import { probeWebm } from "./probe-webm.ts";

export { ProbeError, type AudioProbe } from "./probe-common.ts";

function probeWav(b: Uint8Array): AudioProbe {
  let at = 12;
  let fmt: { tag: number; channels: number; rate: number; blockAlign: number; bits: number; samplesPerBlock: number } | null = null;
  while (at + 8 <= b.length) {
    const id = String.fromCharCode(b[at], b[at + 1], b[at + 2], b[at + 3]);
    const size = u32le(b, at + 4);
    if (id === "fmt " && at + 24 <= b.length) {
      let tag = u16le(b, at + 8);
      if (tag === 0xfffe && at + 34 <= b.length) tag = u16le(b, at + 32);
      fmt = { tag, channels: u16le(b, at + 10), rate: u32le(b, at + 12), blockAlign: u16le(b, at + 20), bits: u16le(b, at + 22), samplesPerBlock: size >= 20 && at + 28 <= b.length ? u16le(b, at + 26) : 0 };
    }
    if (id === "data") {
      if (!fmt) return fail("the WAV data chunk comes before its format chunk");
      if (fmt.channels === 0 || fmt.blockAlign === 0) return fail("the WAV format chunk declares no channels or a zero block size");
      const available = b.length - at - 8;
      const bytes = size === 0 || size === 0xffffffff ? available : Math.min(size, available);
      const blocks = Math.ceil(bytes / fmt.blockAlign);
      let frames = Math.floor(bytes / fmt.blockAlign);
      // ADPCM: each block holds a header per channel and 4-bit codes; a block cannot hold more samples than that.
      if (fmt.tag === 0x11 || fmt.tag === 0x02) {
        const perChannel = fmt.blockAlign / fmt.channels;
        const most = fmt.tag === 0x11 ? (perChannel - 4) * 2 + 1 : (perChannel - 7) * 2 + 2;
        const spb = fmt.samplesPerBlock || most;
        if (spb > most || most < 1) return fail(`the WAV ADPCM header declares ${spb} samples in a block of ${fmt.blockAlign} bytes`);
        frames = blocks * spb;
      }
      return { format: "wav", decoder: "wav", channels: fmt.channels, sampleRate: fmt.rate, frames };
    }
    at += 8 + size + (size & 1);
  }
  return fail("the WAV file has no data chunk");
}

function crc8(b: Uint8Array, from: number, to: number): number {
  let crc = 0;
  for (let i = from; i < to; i++) {
    crc ^= b[i];
    for (let k = 0; k < 8; k++) crc = crc & 0x80 ? ((crc << 1) ^ 0x07) & 0xff : (crc << 1) & 0xff;
  }
  return crc;
}

/** The FLAC frame header at `at` (samples per channel, channels), or null when there is none with a valid CRC-8. */
function flacFrameHeader(b: Uint8Array, at: number): { samples: number; channels: number } | null {
  if (b[at] !== 0xff || (b[at + 1] & 0xfe) !== 0xf8 || at + 6 > b.length) return null;
  const sizeCode = b[at + 2] >> 4;
  const rateCode = b[at + 2] & 0x0f;
  const channelCode = b[at + 3] >> 4;
  const depthCode = (b[at + 3] >> 1) & 0x07;
  if (sizeCode === 0 || rateCode === 15 || channelCode > 10 || depthCode === 3 || b[at + 3] & 1) return null;
  const lead = b[at + 4];
  const numberBytes = lead < 0x80 ? 1 : lead >= 0xc0 && lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : lead < 0xf8 ? 4 : lead < 0xfc ? 5 : lead < 0xfe ? 6 : 7;
  let end = at + 4 + numberBytes;
  let samples: number;
  if (sizeCode === 1) samples = 192;
  else if (sizeCode <= 5) samples = 576 << (sizeCode - 2);
  else if (sizeCode === 6) samples = b[end++] + 1;
  else if (sizeCode === 7) samples = ((b[end++] << 8) | b[end++]) + 1;
  else samples = 256 << (sizeCode - 8);
  end += rateCode === 12 ? 1 : rateCode === 13 || rateCode === 14 ? 2 : 0;
  if (end >= b.length || crc8(b, at, end) !== b[end]) return null;
  return { samples, channels: channelCode < 8 ? channelCode + 1 : 2 };
}

const flacPieceSamples = 1 << 20;
const flacPieceBytes = 64 * 1024;

function probeFlac(b: Uint8Array): AudioProbe {
  // STREAMINFO is the first metadata block: 20 bits rate, 3 bits channels - 1, 5 bits depth, 36 bits total.
  if (b.length < 42 || (b[4] & 0x7f) !== 0) return fail("the FLAC stream does not start with its STREAMINFO block");
  const rate = (b[18] << 12) | (b[19] << 4) | (b[20] >> 4);
  let channels = ((b[20] >> 1) & 0x07) + 1;
  // The total in STREAMINFO may be 0 (unknown) or a lie; the frames' own headers say what will decode.
  let at = 4;
  for (;;) {
    if (at + 4 > b.length) return fail("the FLAC stream ends inside its metadata");
    const last = b[at] & 0x80;
    at += 4 + ((b[at + 1] << 16) | (b[at + 2] << 8) | b[at + 3]);
    if (last) break;
  }
  const pieceStarts: number[] = [];
  let frames = 0;
  let pieceSamples = Infinity;
  let pieceStart = 0;
  for (; at < b.length - 5; at++) {
    if (b[at] !== 0xff) continue;
    const header = flacFrameHeader(b, at);
    if (!header) continue;
    if (pieceSamples >= flacPieceSamples || at - pieceStart >= flacPieceBytes) {
      pieceStarts.push(at);
      pieceStart = at;
      pieceSamples = 0;
    }
    pieceSamples += header.samples * header.channels;
    frames += header.samples;
    channels = Math.max(channels, header.channels);
  }
  return { format: "flac", decoder: "flac", channels, sampleRate: rate, frames, pieceStarts };
}

/** The granule position of the last page that has one (the stream's length in samples), or null. */
function lastGranule(b: Uint8Array): number | null {
  for (let at = b.length - 27; at >= Math.max(0, b.length - 65_536 - 27); at--) {
    if (!ascii(b, at, "OggS")) continue;
    const low = u32le(b, at + 6);
    const high = u32le(b, at + 10);
    if (low === 0xffffffff && high === 0xffffffff) continue;
    return high * 2 ** 32 + low;
  }
  return null;
}

function probeOgg(b: Uint8Array): AudioProbe {
  if (b.length < 28) return fail("the Ogg stream ends inside its first page");
  const packet = 27 + b[26];
  const granule = lastGranule(b);
  if (ascii(b, packet, "OpusHead") && b.length >= packet + 19) {
    const preSkip = u16le(b, packet + 10);
    return { format: "ogg", decoder: "opus", channels: b[packet + 9], sampleRate: 48_000, frames: granule === null ? null : Math.max(0, granule - preSkip) };
  }
  if (b[packet] === 1 && ascii(b, packet + 1, "vorbis") && b.length >= packet + 16) {
    return { format: "ogg", decoder: "oga", channels: b[packet + 11], sampleRate: u32le(b, packet + 12), frames: granule };
  }
  return fail("the Ogg stream holds neither Opus nor Vorbis");
}

function probeMp3(b: Uint8Array): AudioProbe {
  let at = skipId3(b);
  // A few bytes of junk before the first frame are common (padding after the tag).
  const limit = Math.min(b.length, at + 4096);
  while (at < limit && !mpegFrameInfo(b, at)) at++;
  const first = mpegFrameInfo(b, at);
  if (!first) return fail("no MPEG audio frame was found");
  // Count as the decoder reads: past a byte that is not a frame, it looks for the next one.
  let frames = 0;
  while (at < b.length) {
    const frame = b[at] === 0xff ? mpegFrameInfo(b, at) : null;
    if (!frame) {
      at++;
      continue;
    }
    frames += frame.samples;
    at += frame.length;
  }
  return { format: "mp3", decoder: "mp3", channels: first.channels, sampleRate: first.rate, frames };
}

/** An 80-bit IEEE 754 extended float (AIFF's sample rate). */
function extended(b: Uint8Array, at: number): number {
  const exponent = (((b[at] & 0x7f) << 8) | b[at + 1]) - 16383;
  const mantissa = u32be(b, at + 2) * 2 ** 32 + u32be(b, at + 6);
  return mantissa * 2 ** (exponent - 63);
}

function probeAiff(b: Uint8Array): AudioProbe {
  let at = 12;
  while (at + 8 <= b.length) {
    const id = String.fromCharCode(b[at], b[at + 1], b[at + 2], b[at + 3]);
    const size = u32be(b, at + 4);
    if (id === "COMM" && at + 26 <= b.length) {
      return { format: "aiff", decoder: "aiff", channels: u16be(b, at + 8), sampleRate: Math.round(extended(b, at + 16)), frames: u32be(b, at + 10) };
    }
    at += 8 + size + (size & 1);
  }
  return fail("the AIFF file has no COMM chunk");
}

function probeCaf(b: Uint8Array): AudioProbe {
  let at = 8;
  let desc: { rate: number; format: string; bytesPerPacket: number; framesPerPacket: number; channels: number } | null = null;
  let validFrames: number | null = null;
  let dataBytes: number | null = null;
  while (at + 12 <= b.length) {
    const id = String.fromCharCode(b[at], b[at + 1], b[at + 2], b[at + 3]);
    const declared = u64be(b, at + 4);
    const size = declared > b.length ? b.length - at - 12 : declared;
    if (id === "desc" && at + 44 <= b.length) {
      desc = { rate: view(b).getFloat64(at + 12), format: String.fromCharCode(...b.subarray(at + 20, at + 24)), bytesPerPacket: u32be(b, at + 28), framesPerPacket: u32be(b, at + 32), channels: u32be(b, at + 36) };
    }
    if (id === "pakt" && at + 28 <= b.length) validFrames = u64be(b, at + 20);
    if (id === "data") dataBytes = Math.max(0, (declared === 2 ** 64 - 1 || declared > b.length ? b.length - at - 12 : declared) - 4);
    at += 12 + size;
  }
  if (!desc) return fail("the CAF file has no description chunk");
  if (desc.framesPerPacket > 65_536) return fail(`the CAF description declares ${desc.framesPerPacket} frames per packet`);
  let frames = validFrames;
  if (frames === null && dataBytes !== null && desc.bytesPerPacket > 0) frames = Math.floor(dataBytes / desc.bytesPerPacket) * Math.max(1, desc.framesPerPacket);
  return { format: "caf", decoder: "caf", channels: desc.channels, sampleRate: Math.round(desc.rate), frames };
}

/** Reads channels, rate and declared length from the container; throws ProbeError for what cannot be decoded safely. */
export function probeAudio(b: Uint8Array, format: AudioFormat): AudioProbe {
  switch (format) {
    case "wav":
      return probeWav(b);
    case "flac":
      return probeFlac(b);
    case "ogg":
      return probeOgg(b);
    case "mp3":
      return probeMp3(b);
    case "m4a":
      return probeMp4(b);
    case "webm":
      return probeWebm(b);
    case "aiff":
      return probeAiff(b);
    case "caf":
      return probeCaf(b);
  }
}
