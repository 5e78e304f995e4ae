import { ascii, mpegFrameInfo, readEbmlElement, skipId3, u32be, u32le, type AudioFormat } from "./sniff.ts";

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

const fail = (message: string): never => {
  throw new ProbeError(message);
};

const u16le = (b: Uint8Array, at: number) => b[at] | (b[at + 1] << 8);
const u16be = (b: Uint8Array, at: number) => (b[at] << 8) | b[at + 1];
const u64be = (b: Uint8Array, at: number) => u32be(b, at) * 2 ** 32 + u32be(b, at + 4);
const view = (b: Uint8Array) => new DataView(b.buffer, b.byteOffset, b.byteLength);

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

interface Box {
  type: string;
  start: number;
  /** First byte of the payload. */
  body: number;
  end: number;
}

/** The boxes between `start` and `end`; a box that declares more bytes than remain is cut to what remains. */
export function mp4Boxes(b: Uint8Array, start: number, end: number): Box[] {
  const boxes: Box[] = [];
  let at = start;
  while (at + 8 <= end) {
    let size = u32be(b, at);
    let body = at + 8;
    if (size === 1) {
      if (at + 16 > end) break;
      size = u64be(b, at + 8);
      body = at + 16;
    } else if (size === 0) size = end - at;
    if (size < body - at) return fail("the MP4 container has a malformed box");
    boxes.push({ type: String.fromCharCode(b[at + 4], b[at + 5], b[at + 6], b[at + 7]), start: at, body, end: Math.min(at + size, end) });
    at += size;
  }
  return boxes;
}

const child = (b: Uint8Array, box: Box | undefined, type: string) => (box ? mp4Boxes(b, box.body, box.end).find((c) => c.type === type) : undefined);

/** A sample table's entry count, checked against the bytes its box holds. */
function tableCount(b: Uint8Array, box: Box | undefined, headerBytes: number, entryBytes: number, name: string): number {
  if (!box) return 0;
  const count = u32be(b, box.body + headerBytes - 4);
  if (box.body + headerBytes + count * entryBytes > box.end) return fail(`the MP4 '${name}' table declares ${count} entries but its box holds fewer`);
  return count;
}

const aacRates = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350];

/**
 * From an AAC AudioSpecificConfig: channels (0 when given elsewhere), the core rate (0 when unknown; the sample
 * entry's 16.16 field cannot hold 88.2 and 96 kHz) and whether SBR is signalled.
 */
function aacConfig(esdsBody: Uint8Array): { channels: number; rate: number; sbr: boolean } {
  // Descriptors: ES (0x03) > DecoderConfig (0x04) > DecoderSpecificInfo (0x05) holding the AudioSpecificConfig.
  let at = 4;
  while (at < esdsBody.length - 2) {
    const tag = esdsBody[at++];
    let length = 0;
    let byte: number;
    do {
      byte = esdsBody[at++];
      length = (length << 7) | (byte & 0x7f);
    } while (byte & 0x80 && at < esdsBody.length);
    if (tag === 0x03) at += 3;
    else if (tag === 0x04) at += 13;
    else if (tag === 0x05) {
      const objectType = esdsBody[at] >> 3;
      const rateIndex = ((esdsBody[at] & 0x07) << 1) | (esdsBody[at + 1] >> 7);
      const configAt = rateIndex === 15 ? 4 : 1;
      const channelConfig = ((esdsBody[at + configAt] ?? 0) >> 3) & 0x0f;
      const rate = rateIndex === 15 ? (((esdsBody[at + 1] & 0x7f) << 17) | (esdsBody[at + 2] << 9) | (esdsBody[at + 3] << 1) | (esdsBody[at + 4] >> 7)) : (aacRates[rateIndex] ?? 0);
      return { channels: [0, 1, 2, 3, 4, 5, 6, 8][channelConfig] ?? 0, rate, sbr: objectType === 5 || objectType === 29 };
    } else at += length;
  }
  return { channels: 0, rate: 0, sbr: false };
}

function probeMp4(b: Uint8Array): AudioProbe {
  const top = mp4Boxes(b, 0, b.length);
  const moov = top.find((box) => box.type === "moov");
  if (!moov) return fail("the MP4 container has no 'moov' index (the upload is probably cut off)");
  const tracks = mp4Boxes(b, moov.body, moov.end).filter((box) => box.type === "trak");
  for (const trak of tracks) {
    const mdia = child(b, trak, "mdia");
    const hdlr = child(b, mdia, "hdlr");
    if (!hdlr || !ascii(b, hdlr.body + 8, "soun")) continue;
    const stbl = child(b, child(b, mdia, "minf"), "stbl");
    const stsd = child(b, stbl, "stsd");
    if (!stsd || stsd.body + 16 + 28 > stsd.end) return fail("the MP4 audio track has no sample description");
    const entry = stsd.body + 8;
    const codec = String.fromCharCode(b[entry + 4], b[entry + 5], b[entry + 6], b[entry + 7]);
    if (codec !== "mp4a") return fail(`the MP4 audio track is '${codec}'; only AAC is supported in MP4`);
    const entryEnd = Math.min(stsd.end, entry + u32be(b, entry));
    const esds = mp4Boxes(b, entry + 36, entryEnd).find((box) => box.type === "esds");
    const asc = esds ? aacConfig(b.subarray(esds.body, esds.end)) : { channels: 0, rate: 0, sbr: false };
    const channels = Math.max(u16be(b, entry + 24), asc.channels);
    const coreRate = asc.rate || u32be(b, entry + 32) >>> 16;
    const stsz = child(b, stbl, "stsz");
    if (!stsz || stsz.body + 12 > stsz.end) return fail("the MP4 audio track has no sample sizes");
    const constantSize = u32be(b, stsz.body + 4);
    const samples = constantSize > 0 ? u32be(b, stsz.body + 8) : tableCount(b, stsz, 12, 4, "stsz");
    // Every sample occupies bytes in the file: a constant size cannot describe more samples than fit.
    if (constantSize > 0 && samples * constantSize > b.length) return fail(`the MP4 'stsz' table declares ${samples} samples of ${constantSize} bytes, more than the file holds`);
    // Chunks, chunk runs and duration runs each cover at least one sample: more entries than samples is a table
    // built to make the decoder allocate, not a recording.
    for (const [name, headerBytes, entryBytes] of [["stco", 8, 4], ["co64", 8, 8], ["stsc", 8, 12], ["stts", 8, 8]] as const) {
      const count = tableCount(b, child(b, stbl, name), headerBytes, entryBytes, name);
      if (count > samples) return fail(`the MP4 '${name}' table has ${count} entries for ${samples} samples`);
    }
    return { format: "m4a", decoder: "m4a", channels, sampleRate: asc.sbr ? coreRate * 2 : coreRate, frames: samples * (asc.sbr ? 2048 : 1024) };
  }
  return fail("the MP4 container has no audio track");
}

function ebmlChildren(b: Uint8Array, start: number, end: number, visit: (id: number, dataStart: number, dataEnd: number) => boolean | void): void {
  let at = start;
  while (at < end) {
    const element = readEbmlElement(b, at);
    if (!element) return;
    const dataEnd = element.size === null ? end : Math.min(end, element.dataStart + element.size);
    if (visit(element.id, element.dataStart, dataEnd) === false) return;
    if (element.size === null) return;
    at = element.dataStart + element.size;
  }
}

const ebmlUint = (b: Uint8Array, start: number, end: number) => {
  let value = 0;
  for (let i = start; i < end; i++) value = value * 256 + b[i];
  return value;
};
const ebmlFloat = (b: Uint8Array, start: number, end: number) => (end - start === 4 ? view(b).getFloat32(start) : end - start === 8 ? view(b).getFloat64(start) : 0);

function probeWebm(b: Uint8Array): AudioProbe {
  const header = readEbmlElement(b, 0);
  if (!header || header.size === null) return fail("the WebM file ends inside its header");
  let scale = 1_000_000;
  let duration: number | null = null;
  let track: { codec: string; channels: number; rate: number } | null = null;
  ebmlChildren(b, header.dataStart + header.size, b.length, (id, start, end) => {
    if (id !== 0x18538067) return;
    ebmlChildren(b, start, end, (sid, s, e) => {
      if (sid === 0x1f43b675) return false; // the first Cluster: the headers are behind us
      if (sid === 0x1549a966) {
        ebmlChildren(b, s, e, (iid, is, ie) => {
          if (iid === 0x2ad7b1) scale = ebmlUint(b, is, ie);
          if (iid === 0x4489) duration = ebmlFloat(b, is, ie);
        });
      }
      if (sid === 0x1654ae6b) {
        ebmlChildren(b, s, e, (tid, ts, te) => {
          if (tid !== 0xae || track) return;
          const entry = { codec: "", channels: 1, rate: 8000, type: 0, opusChannels: 0 };
          ebmlChildren(b, ts, te, (fid, fs, fe) => {
            if (fid === 0x83) entry.type = ebmlUint(b, fs, fe);
            if (fid === 0x86) entry.codec = String.fromCharCode(...b.subarray(fs, fe));
            if (fid === 0x63a2 && ascii(b, fs, "OpusHead")) entry.opusChannels = b[fs + 9];
            if (fid === 0xe1) {
              ebmlChildren(b, fs, fe, (aid, as, ae) => {
                if (aid === 0xb5) entry.rate = ebmlFloat(b, as, ae);
                if (aid === 0x9f) entry.channels = ebmlUint(b, as, ae);
              });
            }
          });
          if (entry.type === 2) track = { codec: entry.codec, channels: Math.max(entry.channels, entry.opusChannels), rate: entry.rate };
        });
      }
    });
    return false;
  });
  const audio = track as { codec: string; channels: number; rate: number } | null;
  if (!audio) return fail("the WebM file has no audio track");
  if (audio.codec !== "A_OPUS" && audio.codec !== "A_VORBIS") return fail(`the WebM audio track is ${audio.codec || "of an unnamed codec"}; only Opus and Vorbis are supported`);
  const rate = audio.codec === "A_OPUS" ? 48_000 : Math.round(audio.rate);
  const seconds = duration === null ? null : (duration * scale) / 1e9;
  return { format: "webm", decoder: "webm", channels: audio.channels, sampleRate: rate, frames: seconds === null ? null : Math.ceil(seconds * rate) };
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
