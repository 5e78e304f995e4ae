/**
 * Hostile audio built in the test (no binaries in the repo): tiny files that decode to huge amounts of samples.
 */

function crc8(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte;
    for (let i = 0; i < 8; i++) crc = crc & 0x80 ? ((crc << 1) ^ 0x07) & 0xff : (crc << 1) & 0xff;
  }
  return crc;
}

function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x8005) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/** FLAC's UTF-8-like coding of a frame number. */
function codedNumber(n: number): number[] {
  if (n < 0x80) return [n];
  if (n < 0x800) return [0xc0 | (n >> 6), 0x80 | (n & 0x3f)];
  if (n < 0x10000) return [0xe0 | (n >> 12), 0x80 | ((n >> 6) & 0x3f), 0x80 | (n & 0x3f)];
  return [0xf0 | (n >> 18), 0x80 | ((n >> 12) & 0x3f), 0x80 | ((n >> 6) & 0x3f), 0x80 | (n & 0x3f)];
}

export interface FlacBombOptions {
  /** Frames of 65,535 samples per channel, each about 35 bytes. */
  frames: number;
  /** 1 to 8. */
  channels: number;
  /** A multiple of 10 Hz up to 655,350 Hz. */
  sampleRate: number;
  /** The total STREAMINFO declares: the true total, or 0 (unknown, as a live encoder writes). */
  declareTotal: boolean;
}

/**
 * A valid FLAC stream of near-empty frames: each frame holds 65,535 samples per channel as CONSTANT subframes
 * (3 bytes per channel), so 35 bytes decode to 2 MB of float samples at 8 channels.
 */
export function flacBomb(options: FlacBombOptions): Buffer {
  const block = 65535;
  const info = Buffer.alloc(4 + 4 + 34);
  info.write("fLaC", 0, "latin1");
  info[4] = 0x80; // last metadata block, type 0 (STREAMINFO)
  info.writeUIntBE(34, 5, 3);
  const si = info.subarray(8);
  si.writeUInt16BE(block, 0);
  si.writeUInt16BE(block, 2);
  // min/max frame size (3 bytes each) stay 0: unknown.
  const total = options.declareTotal ? options.frames * block : 0;
  // 20 bits rate, 3 bits channels-1, 5 bits bits-per-sample-1 (16), 36 bits total samples.
  const packed = (BigInt(options.sampleRate) << 44n) | (BigInt(options.channels - 1) << 41n) | (15n << 36n) | BigInt(total);
  si.writeBigUInt64BE(packed, 10);
  // MD5 (16 bytes) stays 0: not checked.
  const frames: Buffer[] = [info];
  for (let n = 0; n < options.frames; n++) {
    // Sync (fixed block size), block size and rate (in tens of Hz) as 16 bits at the end of the header,
    // independent channels, 16-bit samples.
    const tens = Math.round(options.sampleRate / 10);
    const head = [0xff, 0xf8, 0x7e, ((options.channels - 1) << 4) | 0x08, ...codedNumber(n), (block - 1) >> 8, (block - 1) & 0xff, tens >> 8, tens & 0xff];
    head.push(crc8(Uint8Array.from(head)));
    const subframes: number[] = [];
    for (let c = 0; c < options.channels; c++) subframes.push(0x00, 0x01, 0x00); // CONSTANT, value 256
    const body = Uint8Array.from([...head, ...subframes]);
    const crc = crc16(body);
    frames.push(Buffer.from([...body, crc >> 8, crc & 0xff]));
  }
  return Buffer.concat(frames);
}

function box(type: string, ...parts: Buffer[]): Buffer {
  const body = Buffer.concat(parts);
  const head = Buffer.alloc(8);
  head.writeUInt32BE(8 + body.length, 0);
  head.write(type, 4, "latin1");
  return Buffer.concat([head, body]);
}

const u32 = (...values: number[]) => {
  const b = Buffer.alloc(4 * values.length);
  values.forEach((v, i) => b.writeUInt32BE(v, 4 * i));
  return b;
};

/**
 * An M4A (mono AAC-LC at 48 kHz, index first) of `samples` one-byte samples, each in a chunk of its own: its sample
 * tables are as long as the recording allows, and a decoder builds one object per chunk-table entry.
 */
export function m4aManyChunks(samples: number): Buffer {
  const ftyp = box("ftyp", Buffer.from("M4A "), u32(0), Buffer.from("M4A isom"));
  // AudioSpecificConfig: AAC-LC (2), 48 kHz (index 3), mono (1).
  const asc = Buffer.from([0x11, 0x88]);
  const decoderConfig = Buffer.concat([Buffer.from([0x04, 13 + 2 + asc.length, 0x40, 0x15, 0, 0, 0]), u32(0, 0), Buffer.from([0x05, asc.length]), asc]);
  const es = Buffer.concat([Buffer.from([0x03, 3 + decoderConfig.length + 3, 0, 1, 0]), decoderConfig, Buffer.from([0x06, 1, 0x02])]);
  const esds = box("esds", u32(0), es);
  const sampleEntry = Buffer.alloc(28);
  sampleEntry.writeUInt16BE(1, 6); // data reference index
  sampleEntry.writeUInt16BE(1, 16); // channels
  sampleEntry.writeUInt16BE(16, 18); // sample size
  sampleEntry.writeUInt32BE(48_000 * 65536, 24); // 16.16 fixed point
  const mp4a = box("mp4a", sampleEntry, esds);
  const stsd = box("stsd", u32(0, 1), mp4a);
  const stts = box("stts", u32(0, 1, samples, 1024));
  const stscEntries = Buffer.alloc(12 * samples);
  for (let i = 0; i < samples; i++) stscEntries.writeUInt32BE(i + 1, 12 * i), stscEntries.writeUInt32BE(1, 12 * i + 4), stscEntries.writeUInt32BE(1, 12 * i + 8);
  const stsc = box("stsc", u32(0, samples), stscEntries);
  const stsz = box("stsz", u32(0, 1, samples));
  const stcoFor = (mdatBody: number) => {
    const offsets = Buffer.alloc(4 * samples);
    for (let i = 0; i < samples; i++) offsets.writeUInt32BE(mdatBody + i, 4 * i);
    return box("stco", u32(0, samples), offsets);
  };
  const mdhd = box("mdhd", u32(0, 0, 0, 48_000, samples * 1024), Buffer.from([0x55, 0xc4, 0, 0]));
  const hdlr = box("hdlr", u32(0, 0), Buffer.from("soun"), Buffer.alloc(12), Buffer.from([0]));
  const moovWith = (stco: Buffer) => box("moov", box("trak", box("mdia", mdhd, hdlr, box("minf", box("stbl", stsd, stts, stsc, stsz, stco)))));
  const moovSize = moovWith(stcoFor(0)).length;
  const mdatBody = ftyp.length + moovSize + 8;
  return Buffer.concat([ftyp, moovWith(stcoFor(mdatBody)), box("mdat", Buffer.alloc(samples))]);
}

function crc32Ogg(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 24;
    for (let i = 0; i < 8; i++) crc = crc & 0x80000000 ? (crc << 1) ^ 0x04c11db7 : crc << 1;
  }
  return crc >>> 0;
}

function oggPage(flags: number, granule: bigint, sequence: number, packets: Buffer[]): Buffer {
  const segments = packets.flatMap((p) => {
    const lacing = Array(Math.floor(p.length / 255)).fill(255);
    return [...lacing, p.length % 255];
  });
  const header = Buffer.alloc(27 + segments.length);
  header.write("OggS", 0, "latin1");
  header[5] = flags;
  header.writeBigUInt64LE(granule, 6);
  header.writeUInt32LE(0x6d67, 14); // stream serial
  header.writeUInt32LE(sequence, 18);
  header[26] = segments.length;
  Buffer.from(segments).copy(header, 27);
  const page = Buffer.concat([header, ...packets]);
  page.writeUInt32LE(crc32Ogg(page), 22);
  return page;
}

/**
 * Ogg Opus, stereo, whose packets are 2 bytes each: 48 empty 2.5 ms frames (code 3, CBR), which the decoder fills
 * with 120 ms of concealment, 11,520 samples. No page carries a granule position, so the length is unknown until
 * decoded.
 */
export function opusBomb(packets: number): Buffer {
  const head = Buffer.alloc(19);
  head.write("OpusHead", 0, "latin1");
  head[8] = 1;
  head[9] = 2; // channels
  head.writeUInt16LE(312, 10);
  head.writeUInt32LE(48_000, 12);
  const tags = Buffer.concat([Buffer.from("OpusTags", "latin1"), u32le(4), Buffer.from("test", "latin1"), u32le(0)]);
  const none = 0xffffffffffffffffn;
  const pages = [oggPage(0x02, 0n, 0, [head]), oggPage(0, 0n, 1, [tags])];
  // TOC: config 28 (CELT, fullband, 2.5 ms), stereo, code 3; then CBR, no padding, 48 frames.
  const packet = Buffer.from([(28 << 3) | 0x04 | 0x03, 48]);
  for (let sent = 0, sequence = 2; sent < packets; sequence++) {
    const count = Math.min(255, packets - sent);
    sent += count;
    pages.push(oggPage(sent === packets ? 0x04 : 0, none, sequence, Array(count).fill(packet)));
  }
  return Buffer.concat(pages);
}

function u32le(value: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(value, 0);
  return b;
}
