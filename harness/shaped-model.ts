import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";

const forge = path.resolve(import.meta.dirname, "../../shared/tools/forge/shaped.mjs");

/**
 * The SmolLM2-135M-shaped GGUF (random weights, never stops early: N tokens asked, N generated), written once
 * into a cache outside the repo (MODELGATE_MODEL_CACHE, default ~/.cache/modelgate-models); about 7 s the first time.
 */
export function shapedModel(): string {
  const dir = process.env.MODELGATE_MODEL_CACHE ?? path.join(homedir(), ".cache/modelgate-models");
  const file = path.join(dir, "shaped-smollm2-135m-f16.gguf");
  if (!existsSync(file)) execFileSync(process.execPath, [forge, "--shape", "smollm2-135m", "--out", dir], { stdio: "ignore" });
  return file;
}
