import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

const forgeGguf = path.resolve(import.meta.dirname, "../../shared/tools/forge/gguf.mjs");
const stories = path.resolve(import.meta.dirname, "../../shared/models/stories260K.gguf");

interface GgufKv {
  key: string;
  type: number;
  value: unknown;
}
/** The parts of the forge's GGUF module (../shared/tools/forge/gguf.mjs) used here. */
interface Forge {
  readGGUF(buf: Buffer): { kv: GgufKv[]; tensors: unknown[]; alignment: number };
  writeGGUF(gguf: { kv: GgufKv[]; tensors: unknown[]; alignment: number }): Buffer;
}

/**
 * stories260K whose end-of-sequence token is its "." piece, written once into the model cache
 * (MODELGATE_MODEL_CACHE, default ~/.cache/modelgate-models). stories260K itself never generates `</s>`, so every
 * answer runs to max_tokens; this one ends its turn at the end of its first sentence, as an instruction-tuned model
 * ends an answer. Clients that treat a `max_tokens` stop as a failure (Claude Code retries it, then exits 1) get a
 * real `end_turn` from the real weights. The "." ends the turn and is not part of the answer. Same bytes on every run.
 */
export async function sentenceEndModel(): Promise<string> {
  const dir = process.env.MODELGATE_MODEL_CACHE ?? path.join(homedir(), ".cache/modelgate-models");
  const file = path.join(dir, "stories260K-sentence-end-v1.gguf");
  if (existsSync(file)) return file;
  const forge = (await import(pathToFileURL(forgeGguf).href)) as Forge;
  const gguf = forge.readGGUF(readFileSync(stories));
  // The unset separator and padding ids (0xffffffff) make llama.cpp warn at every load; they are left out.
  const kv = gguf.kv.filter((e) => !(e.key.endsWith("seperator_token_id") || e.key.endsWith("padding_token_id")) || e.value !== 0xffffffff);
  const tokens = kv.find((e) => e.key === "tokenizer.ggml.tokens")!.value as string[];
  kv.find((e) => e.key === "tokenizer.ggml.eos_token_id")!.value = tokens.indexOf(".");
  kv.find((e) => e.key === "general.name")!.value = "stories260K-sentence-end";
  mkdirSync(dir, { recursive: true });
  // Written aside and renamed: test files running at once never read half a file.
  const partial = `${file}.${process.pid}.partial`;
  writeFileSync(partial, forge.writeGGUF({ kv, tensors: gguf.tensors, alignment: gguf.alignment }));
  renameSync(partial, file);
  return file;
}
