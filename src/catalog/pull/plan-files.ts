import path from "node:path";
import { quantPattern, type HubRef } from "../../config/hub-ref.ts";
import type { HubSibling } from "./hub-client.ts";
import { PlanError } from "./plan-error.ts";

/** transformers.js' file suffix per dtype (DEFAULT_DTYPE_SUFFIX_MAPPING in @huggingface/transformers utils/dtypes.js). */
export const dtypeSuffixes: Record<string, string> = {
  fp32: "",
  fp16: "_fp16",
  int8: "_int8",
  uint8: "_uint8",
  q8: "_quantized",
  q4: "_q4",
  q2: "_q2",
  q1: "_q1",
  q4f16: "_q4f16",
  q2f16: "_q2f16",
  q1f16: "_q1f16",
  bnb4: "_bnb4",
};

/** Config, tokenizer and processor files transformers.js reads next to the ONNX weights. */
const configExtensions = [".json", ".txt", ".jinja", ".model", ".tiktoken"];

function isConfigFile(name: string): boolean {
  const lower = name.toLowerCase();
  if (!configExtensions.some((ext) => lower.endsWith(ext))) return false;
  const parts = name.split("/");
  if (parts.length === 1) return true;
  // onnx/ may hold its own config; sentence-transformers modules live in 1_Pooling/, 2_Normalize/...
  return parts.length === 2 && (parts[0] === "onnx" || /^\d+_/.test(parts[0]));
}

/** `onnx/encoder_model_quantized.onnx` -> { stem: "encoder_model", dtype: "q8" }. */
function splitOnnxName(file: string): { stem: string; dtype: string } | null {
  const match = /^onnx\/([^/]+)\.onnx$/.exec(file);
  if (!match) return null;
  const base = match[1];
  // Longest suffix first, so `_q4f16` is not read as `_q4`... (none is a suffix of another today, but be safe).
  const byLength = Object.entries(dtypeSuffixes)
    .filter(([, suffix]) => suffix)
    .sort((a, b) => b[1].length - a[1].length);
  for (const [dtype, suffix] of byLength) {
    if (base.endsWith(suffix)) return { stem: base.slice(0, -suffix.length), dtype };
  }
  return { stem: base, dtype: "fp32" };
}

/** The dtypes an ONNX repo ships, e.g. ["fp16", "fp32", "q8"]. */
export function availableDtypes(siblings: HubSibling[]): string[] {
  const found = new Set<string>();
  for (const s of siblings) {
    const split = splitOnnxName(s.name);
    if (split) found.add(split.dtype);
  }
  return [...found].sort();
}

/** Every file a transformers.js ONNX layout needs for one dtype: configs + onnx/<stem><suffix>.onnx (+ external data). */
export function planOnnxFiles(siblings: HubSibling[], dtype: string, repo: string): HubSibling[] {
  if (!(dtype in dtypeSuffixes)) {
    throw new PlanError(`unknown dtype "${dtype}"; use one of ${Object.keys(dtypeSuffixes).join(", ")}`);
  }
  const weights = siblings.filter((s) => splitOnnxName(s.name)?.dtype === dtype);
  if (weights.length === 0) {
    const dtypes = availableDtypes(siblings);
    throw new PlanError(
      dtypes.length === 0
        ? `${repo} has no onnx/*.onnx files: it is not a transformers.js ONNX layout`
        : `${repo} has no ${dtype} weights; available dtypes: ${dtypes.join(", ")} (pass --dtype)`,
    );
  }
  const stems = new Set(weights.map((s) => splitOnnxName(s.name)!.stem));
  const redundant = (stem: string) => stem === "decoder_model" || stem === "decoder_with_past_model";
  // Every module the repo ships must exist in this dtype, or transformers.js would fail at load time.
  const allStems = new Set(siblings.map((s) => splitOnnxName(s.name)?.stem).filter((s): s is string => Boolean(s)));
  const lacking = [...allStems].filter((stem) => !stems.has(stem) && !(redundant(stem) && allStems.has("decoder_model_merged")));
  if (lacking.length > 0) {
    throw new PlanError(`${repo} has no ${dtype} weights for ${lacking.map((s) => `onnx/${s}`).join(", ")}; available dtypes: ${availableDtypes(siblings).join(", ")} (pass --dtype)`);
  }
  // transformers.js runs the merged decoder; the split ones would only cost bytes.
  const chosen = weights.filter((s) => {
    const stem = splitOnnxName(s.name)!.stem;
    return !(stems.has("decoder_model_merged") && redundant(stem));
  });
  const names = new Set(chosen.map((s) => s.name));
  const externalData = siblings.filter((s) => [...names].some((n) => s.name.startsWith(`${n}_data`)));
  const configs = siblings.filter((s) => isConfigFile(s.name));
  return [...configs, ...chosen, ...externalData];
}

/** The GGUF a ref names: the file itself, or the one whose name carries the quant (Q4_K_M matches *q4_k_m*.gguf). */
export function planGgufFile(siblings: HubSibling[], ref: HubRef): HubSibling {
  const ggufs = siblings.filter((s) => s.name.toLowerCase().endsWith(".gguf"));
  if (ref.file) {
    const found = siblings.find((s) => s.name === ref.file);
    if (!found) {
      throw new PlanError(`${ref.repo} has no file ${ref.file}${ggufs.length ? `; GGUF files: ${ggufs.map((s) => s.name).join(", ")}` : ""}`);
    }
    return found;
  }
  const pattern = quantPattern(ref.quant!);
  const matches = ggufs.filter((s) => pattern.test(path.posix.basename(s.name).toLowerCase()) && !/mmproj/i.test(s.name));
  if (matches.length === 0) {
    throw new PlanError(
      `${ref.repo} has no GGUF for quant ${ref.quant}${ggufs.length ? `; available: ${ggufs.map((s) => s.name).join(", ")}` : " (the repo has no .gguf files)"}`,
    );
  }
  // Split GGUFs (-00001-of-00002) are not supported by this loader; prefer a single top-level file.
  const single = matches.filter((s) => !/-\d{5}-of-\d{5}\.gguf$/i.test(s.name));
  const pick = (single.length ? single : matches).sort((a, b) => a.name.split("/").length - b.name.split("/").length || a.name.length - b.name.length)[0];
  return pick;
}
