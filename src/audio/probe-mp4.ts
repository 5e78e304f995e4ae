import { ascii, u32be } from "./sniff.ts";
import { fail, u16be, u64be, type AudioProbe } from "./probe-common.ts";

// MP4 (M4A): the sound track's AAC sample entry and sample tables, checked against the bytes that hold them.

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

export function probeMp4(b: Uint8Array): AudioProbe {
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
