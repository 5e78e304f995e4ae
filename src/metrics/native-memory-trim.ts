/**
 * glibc keeps the pages of freed blocks resident in its heaps (the main one and one per thread that allocates: the
 * engines', ONNX Runtime's, libuv's pool, the worker threads'), and gives back only a heap's free top. Under mixed
 * traffic the free space in the middle of those heaps grows with each new high-water mark, and RSS with it, although
 * nothing is held (issue 47: 158 of 326 MB free in one soak replica; one call gave 34 MB back). malloc_trim(0)
 * returns every whole free page of every heap. It runs after each major GC, when V8 has just freed the most native
 * memory (ArrayBuffer backing stores, tensors' buffers); what it costs is that the pages are faulted in again when
 * reused, so trims are spaced: a GC that comes sooner after the last trim gets one at the end of the spacing.
 */

/** The fewest ms between two trims, so that a process collecting without pause does not trim at each collection. */
export const trimSpacingMs = 1000;

/**
 * When to trim, given the major GCs: at once, or `spacingMs` after the last trim when that was too recent (one trim
 * pending at most, which covers every GC before it).
 */
export class TrimSchedule {
  private lastAt = Number.NEGATIVE_INFINITY;
  private pending: ReturnType<typeof setTimeout> | null = null;

  constructor(
    private readonly trim: () => void,
    private readonly spacingMs = trimSpacingMs,
    private readonly now = () => performance.now(),
  ) {}

  afterMajorGc(): void {
    if (this.pending) return;
    const wait = this.lastAt + this.spacingMs - this.now();
    if (wait <= 0) return this.run();
    this.pending = setTimeout(() => this.run(), wait);
    this.pending.unref();
  }

  private run(): void {
    this.pending = null;
    this.lastAt = this.now();
    this.trim();
  }
}

let schedule: TrimSchedule | null = null;

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
  if (schedule) return { enabled: true };
  if (!onGlibc()) return { enabled: false, reason: "not glibc" };
  try {
    const { default: koffi } = await import("koffi");
    const mallocTrim = koffi.load("libc.so.6").func("int malloc_trim(size_t pad)") as (pad: number) => number;
    schedule = new TrimSchedule(() => mallocTrim(0));
    return { enabled: true };
  } catch (err) {
    return { enabled: false, reason: (err as Error).message };
  }
}

/** After a major GC: returns glibc's free pages to the system, now or at the end of the spacing (when enabled). */
export function trimAfterMajorGc(): void {
  schedule?.afterMajorGc();
}
