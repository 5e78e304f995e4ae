import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { modelCacheDir } from "./forged-stories.ts";

const forge = path.resolve(import.meta.dirname, "../../shared/tools/forge/shaped.mjs");

/** The shapes and weight types the forge writes (../shared/tools/forge/README.md). */
export type ModelShape = "smollm2-135m" | "qwen3-0.6b";
export type WeightType = "f16" | "f32" | "q8_0";

/**
 * A GGUF in the shape of a real small LLM (random weights, never stops early: N tokens asked, N generated), by
 * default the SmolLM2-135M shape in f16, written once into a cache outside the repo (MODELGATE_MODEL_CACHE, default
 * ~/.cache/modelgate-models); about 7 s the first time (about 30 s for qwen3-0.6b).
 */
export function shapedModel(shape: ModelShape = "smollm2-135m", type: WeightType = "f16"): string {
  const dir = modelCacheDir();
  const file = path.join(dir, `shaped-${shape}-${type}.gguf`);
  if (!existsSync(file)) execFileSync(process.execPath, [forge, "--shape", shape, "--type", type, "--out", dir], { stdio: "ignore" });
  return file;
}
