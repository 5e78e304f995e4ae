import { ascii, readEbmlElement } from "./sniff.ts";
import { fail, view, type AudioProbe } from "./probe-common.ts";

// WebM (Matroska): the first audio track's codec, channels and rate, and the segment's duration, from its EBML headers.

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

export function probeWebm(b: Uint8Array): AudioProbe {
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
