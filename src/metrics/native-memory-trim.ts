/**
 * glibc keeps the pages of freed blocks resident in its heaps (the main one and one per thread that allocates: the
 * engines', ONNX Runtime's, libuv's pool, the worker threads'), and gives back only a heap's free top. Under mixed
 * traffic the free space in the middle of those heaps grows with each new high-water mark, and RSS with it, although
 * nothing is held (issue 47: 34 MB came back from one soak replica at one call). malloc_trim(0) returns every whole
 * free page of every heap. It runs just after a major GC, when V8 has just freed the most native memory (ArrayBuffer
 * backing stores, tensors' buffers); what it costs is that the pages are faulted in again when reused.
 */

/** The fewest ms between two trims: a process collecting without pause does not trim each time. */
const minIntervalMs = 1000;

let mallocTrim: ((pad: number) => number) | null = null;
let lastTrimAt = Number.NEGATIVE_INFINITY;

/** Whether this process runs on glibc (musl, macOS and Windows have no malloc_trim, nor this retention). */
function onGlibc(): boolean {
  if (process.platform !== "linux") return false;
  const report = process.report.getReport() as { header?: { glibcVersionRuntime?: string } };
  return typeof report.header?.glibcVersionRuntime === "string";
}

/**
 * Loads glibc's malloc_trim (through koffi, an FFI with prebuilt binaries). Returns why not when it cannot: not glibc,
 * or no binary for this platform.
 */
export async function enableNativeMemoryTrim(): Promise<{ enabled: true } | { enabled: false; reason: string }> {
  if (mallocTrim) return { enabled: true };
  if (!onGlibc()) return { enabled: false, reason: "not glibc" };
  try {
    const { default: koffi } = await import("koffi");
    mallocTrim = koffi.load("libc.so.6").func("int malloc_trim(size_t pad)") as (pad: number) => number;
    return { enabled: true };
  } catch (err) {
    return { enabled: false, reason: (err as Error).message };
  }
}

/** After a major GC: returns glibc's free pages to the system, unless it did less than `minIntervalMs` ago. */
export function trimAfterMajorGc(now = performance.now()): void {
  if (!mallocTrim || now - lastTrimAt < minIntervalMs) return;
  lastTrimAt = now;
  mallocTrim(0);
}
