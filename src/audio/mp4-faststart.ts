import { mp4Boxes } from "./probe-mp4.ts";
import { u32be } from "./sniff.ts";

const nested = ["trak", "mdia", "minf", "stbl"];

/** Adds `delta` to every chunk offset in the 'moov' box held at the start of `moov`; false when one would overflow. */
function shiftChunkOffsets(moov: Uint8Array, delta: number): boolean {
  const data = new DataView(moov.buffer, moov.byteOffset, moov.byteLength);
  const walk = (start: number, end: number): boolean => {
    for (const box of mp4Boxes(moov, start, end)) {
      if (nested.includes(box.type) && !walk(box.body, box.end)) return false;
      if (box.type === "stco") {
        const count = u32be(moov, box.body + 4);
        for (let i = 0, at = box.body + 8; i < count && at + 4 <= box.end; i++, at += 4) {
          const moved = data.getUint32(at) + delta;
          if (moved > 0xffffffff) return false;
          data.setUint32(at, moved);
        }
      }
      if (box.type === "co64") {
        const count = u32be(moov, box.body + 4);
        for (let i = 0, at = box.body + 8; i < count && at + 8 <= box.end; i++, at += 8) data.setBigUint64(at, data.getBigUint64(at) + BigInt(delta));
      }
    }
    return true;
  };
  const top = mp4Boxes(moov, 0, moov.length)[0];
  return walk(top.body, top.end);
}

/**
 * An MP4 whose index ('moov') follows its media, as phones write it, rewritten with the index first and every chunk
 * offset moved by its size (what qt-faststart does). Fed in pieces, the decoder then yields audio piece by piece
 * instead of all of it in its last call. Null when the index already comes first, or a moved offset would overflow.
 */
export function moovFirst(b: Uint8Array): Uint8Array | null {
  const top = mp4Boxes(b, 0, b.length);
  const moovAt = top.findIndex((box) => box.type === "moov");
  const mdatAt = top.findIndex((box) => box.type === "mdat");
  if (moovAt < 0 || mdatAt < 0 || moovAt < mdatAt) return null;
  const moov = top[moovAt];
  const index = b.slice(moov.start, moov.end);
  if (!shiftChunkOffsets(index, index.length)) return null;
  const insertAt = top[mdatAt].start;
  const out = new Uint8Array(b.length - (moov.end - moov.start) + index.length);
  out.set(b.subarray(0, insertAt), 0);
  out.set(index, insertAt);
  let at = insertAt + index.length;
  for (const box of top.slice(mdatAt)) {
    if (box === moov) continue;
    out.set(b.subarray(box.start, box.end), at);
    at += box.end - box.start;
  }
  return out.subarray(0, at);
}
