import { getLlama, type Llama } from "node-llama-cpp";

let runtime: Promise<Llama> | null = null;

/**
 * The process-wide llama.cpp binding. `build: "never"` uses the prebuilt linux-x64 CPU binary and never
 * compiles or downloads at run time.
 */
export function getLlamaRuntime(): Promise<Llama> {
  runtime ??= getLlama({ build: "never", gpu: false, logLevel: "error" as never, progressLogs: false } as Parameters<typeof getLlama>[0]);
  return runtime;
}
