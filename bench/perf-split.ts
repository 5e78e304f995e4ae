import { execFileSync } from "node:child_process";

/**
 * A `perf record -g` profile of a Node process (started with `--perf-basic-prof`, so JIT frames carry their
 * function and file) as on-CPU time: by the kind of code each sample was in (kernel, OpenSSL, libc, Node and V8's
 * own code, JavaScript), and by its owner, the file of the innermost JavaScript frame on the stack (so the kernel's
 * time in a socket write counts for the stream code that made it). Unlike V8's own profiler, which samples the
 * main thread's wall clock (a thread preempted inside a syscall keeps collecting samples there), perf counts only
 * time on a CPU, in every thread.
 */
export interface CpuSplit {
  samples: number;
  byKind: Map<string, number>;
  byOwner: Map<string, number>;
}

interface Frame {
  symbol: string;
  dso: string;
}

function kindOf({ dso }: Frame): string {
  if (dso.includes("kernel")) return "kernel";
  if (/libcrypto|libssl/.test(dso)) return "openssl";
  if (/\blibc\b|libc\.so/.test(dso)) return "libc";
  if (dso.includes("perf-") || dso.includes("JIT")) return "javascript";
  if (/(^|\/)node$/.test(dso)) return "node binary (V8, libuv, its OpenSSL)";
  return "other";
}

/** The file a JIT frame's symbol names: our dist/ or src/ path, a package, a Node module or a peer script. */
function ownerOf(symbol: string): string {
  const file = /(file:\/\/\S+|node:\S+|\/\S+\.m?[jt]s)/.exec(symbol)?.[1];
  if (!file) return `javascript: ${symbol.slice(0, 40)}`;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/:]+)/.exec(file);
  if (pkg) return `npm: ${pkg[1]}`;
  const ours = /\/(?:dist|src)\/([^:]+)/.exec(file);
  if (ours) return `ours: ${ours[1]}`;
  if (file.startsWith("node:")) return file.split(":").slice(0, 2).join(":");
  return file.split("/").slice(-1)[0]!.split(":")[0]!;
}

/** What a stack without JavaScript was doing: the first frame that names a known piece of work, else its leaf's kind. */
const nativeWorks: [RegExp, string][] = [
  [/Scavenge|MarkCompact|Heap::|GCTracer|Sweeper/, "garbage collection"],
  [/TLSWrap|SSL_|ssl3_|tls13_/, "TLS"],
  [/RunMicrotasks|PerformCheckpoint|InternalCallbackScope/, "microtasks, callback scopes"],
  [/uv__io_poll|epoll|uv__run_timers|uv_run/, "the event loop"],
  [/Compile|Deoptimiz|Turbofan|Maglev/, "the compilers"],
];
function nativeWork(frames: Frame[]): string {
  for (const { symbol } of frames) for (const [pattern, work] of nativeWorks) if (pattern.test(symbol)) return work;
  return kindOf(frames[0]!);
}

const add = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);

export function cpuSplit(perfData: string): CpuSplit {
  const text = execFileSync("perf", ["script", "-i", perfData, "-F", "ip,sym,dso"], { encoding: "utf8", maxBuffer: 1 << 30 });
  const split: CpuSplit = { samples: 0, byKind: new Map(), byOwner: new Map() };
  for (const block of text.split("\n\n")) {
    const frames: Frame[] = [];
    for (const line of block.split("\n")) {
      const m = /^\s*[0-9a-f]+\s+(.*)\s+\((.*)\)\s*$/.exec(line);
      if (m) frames.push({ symbol: m[1]!, dso: m[2]! });
    }
    if (frames.length === 0) continue;
    split.samples++;
    add(split.byKind, kindOf(frames[0]!));
    const js = frames.find((f) => kindOf(f) === "javascript");
    add(split.byOwner, js ? ownerOf(js.symbol) : `(no JavaScript) ${nativeWork(frames)}`);
  }
  return split;
}
