import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

const forgeGguf = path.resolve(import.meta.dirname, "../../shared/tools/forge/gguf.mjs");
const stories = path.resolve(import.meta.dirname, "../../shared/models/stories260K.gguf");

export interface GgufKv {
  key: string;
  type: number;
  itemType?: number;
  value: unknown;
}
export interface GgufTensor {
  name: string;
  dims: number[];
  type: number;
  data: Buffer;
}
export interface Gguf {
  kv: GgufKv[];
  tensors: GgufTensor[];
  alignment: number;
}
/** The parts of the forge's GGUF module (../shared/tools/forge/gguf.mjs) used here. */
export interface Forge {
  T: Record<"UINT32" | "INT32" | "STRING", number>;
  readGGUF(buf: Buffer): Gguf;
  writeGGUF(gguf: Gguf): Buffer;
}

/** Where generated models are cached, outside the repo: MODELGATE_MODEL_CACHE, default ~/.cache/modelgate-models. */
export function modelCacheDir(): string {
  return process.env.MODELGATE_MODEL_CACHE ?? path.join(homedir(), ".cache/modelgate-models");
}

/**
 * A variant of stories260K, written once as `fileName` into the model cache: the forge reads stories260K, `edit`
 * changes it in place, and the forge writes it. Same bytes on every run, so the name is its version.
 */
export async function forgedStories(fileName: string, edit: (gguf: Gguf, forge: Forge) => void): Promise<string> {
  const dir = modelCacheDir();
  const file = path.join(dir, fileName);
  if (existsSync(file)) return file;
  const forge = (await import(pathToFileURL(forgeGguf).href)) as Forge;
  const gguf = forge.readGGUF(readFileSync(stories));
  // The unset separator and padding ids (0xffffffff) make llama.cpp warn at every load; they are left out.
  gguf.kv = gguf.kv.filter((e) => !(e.key.endsWith("seperator_token_id") || e.key.endsWith("padding_token_id")) || e.value !== 0xffffffff);
  edit(gguf, forge);
  mkdirSync(dir, { recursive: true });
  // Written aside and renamed: test files running at once never read half a file.
  const partial = `${file}.${process.pid}.partial`;
  writeFileSync(partial, forge.writeGGUF(gguf));
  renameSync(partial, file);
  return file;
}
