import { takeGlobalFlags } from "./args.ts";

/**
 * glibc's malloc raises its mmap threshold (up to 32 MB) whenever a large mmapped block is freed; from then on blocks
 * of that size come from the heap arenas, whose freed pages mostly stay resident. Under a server's mixed traffic
 * (tensors, audio, bodies of every size) RSS ratchets up by such steps and never comes back (issue 47, decision 0045).
 * A fixed threshold keeps blocks of 1 MiB and more mmapped, so they go back to the system when freed.
 */
export const mmapThresholdTunable = "glibc.malloc.mmap_threshold";
const mmapThresholdBytes = 1024 * 1024;

/**
 * The environment `serve` should run with, or null when it already does: glibc reads GLIBC_TUNABLES once, at process
 * start. An operator's own mmap threshold wins; their other tunables are kept.
 */
export function tunedEnv(env: NodeJS.ProcessEnv, onGlibc: boolean): NodeJS.ProcessEnv | null {
  if (!onGlibc) return null;
  const current = env.GLIBC_TUNABLES ?? "";
  if (current.split(":").some((entry) => entry.startsWith(`${mmapThresholdTunable}=`))) return null;
  const tunables = [current, `${mmapThresholdTunable}=${mmapThresholdBytes}`].filter(Boolean).join(":");
  return { ...env, GLIBC_TUNABLES: tunables };
}

function isGlibc(): boolean {
  if (process.platform !== "linux") return false;
  const report = process.report.getReport() as { header?: { glibcVersionRuntime?: string } };
  return Boolean(report.header?.glibcVersionRuntime);
}

function isServe(argv: string[]): boolean {
  try {
    const { rest, help } = takeGlobalFlags(argv);
    return rest[0] === "serve" && !help;
  } catch {
    return false; // main() reports the bad flag
  }
}

/**
 * Called by the CLI's entry files before anything else: `serve` replaces its own process image with one that has the
 * tunable (process.execve keeps the PID, arguments, flags and descriptors, so supervisors and kill -9 see one process).
 * Every other command, and platforms without glibc, run as they are.
 */
export function reexecServeWithMallocTunables(argv: string[]): void {
  if (!isServe(argv) || typeof process.execve !== "function") return;
  const env = tunedEnv(process.env, isGlibc());
  if (!env) return;
  process.execve(process.execPath, [process.execPath, ...process.execArgv, ...process.argv.slice(1)], env);
}
