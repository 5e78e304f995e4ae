import { getLlama, LlamaLogLevel, type Llama } from "node-llama-cpp";
import { applyGrammarFixes } from "./grammar-fixes.ts";

let runtime: Promise<Llama> | null = null;

/**
 * The process-wide llama.cpp binding. `build: "never"` uses the prebuilt linux-x64 CPU binary and never
 * compiles or downloads at run time. One binding per process is what node-llama-cpp expects, hence the
 * module-level promise (the one deliberate exception to "no module-level state").
 */
export function getLlamaRuntime(): Promise<Llama> {
  runtime ??= applyGrammarFixes().then(() => getLlama({ build: "never", gpu: false, logLevel: LlamaLogLevel.error, progressLogs: false }));
  return runtime;
}
