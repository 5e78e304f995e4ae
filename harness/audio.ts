import { readFileSync } from "node:fs";
import path from "node:path";
import { modelsDir } from "./server.ts";

/** jfk.wav's samples (16 kHz mono s16) followed by `silenceSeconds` of silence, `times` times, as one WAV file. */
export function repeatedJfk(times: number, silenceSeconds: number): Buffer {
  const wav = readFileSync(path.join(modelsDir, "jfk.wav"));
  let at = 12;
  while (wav.toString("ascii", at, at + 4) !== "data") at += 8 + wav.readUInt32LE(at + 4);
  const pcm = wav.subarray(at + 8, at + 8 + wav.readUInt32LE(at + 4));
  const silence = Buffer.alloc(silenceSeconds * 16000 * 2);
  const body = Buffer.concat(Array.from({ length: times }, () => [pcm, silence]).flat());
  const header = Buffer.alloc(44);
  header.write("RIFF", 0, "ascii");
  header.writeUInt32LE(36 + body.length, 4);
  header.write("WAVEfmt ", 8, "ascii");
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20); // PCM
  header.writeUInt16LE(1, 22); // mono
  header.writeUInt32LE(16000, 24);
  header.writeUInt32LE(32000, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write("data", 36, "ascii");
  header.writeUInt32LE(body.length, 40);
  return Buffer.concat([header, body]);
}
