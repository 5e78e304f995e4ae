import { existsSync, readFileSync } from "node:fs";
import path from "node:path";

/** Debian's jemalloc, as the container image installs it (decision 0050), or null when this machine lacks it. */
export const debianJemalloc = ((lib) => (existsSync(lib) ? lib : null))(`/usr/lib/${process.arch === "arm64" ? "aarch64" : "x86_64"}-linux-gnu/libjemalloc.so.2`);

/** The MALLOC_CONF the container image sets beside its LD_PRELOAD (decision 0051): the Dockerfile is its one source. */
export function imageMallocConf(): string {
  const dockerfile = readFileSync(path.join(import.meta.dirname, "..", "Dockerfile"), "utf8");
  const conf = /^\s*MALLOC_CONF=(\S+)/m.exec(dockerfile.slice(dockerfile.lastIndexOf("\nFROM ")))?.[1];
  if (!conf) throw new Error("the Dockerfile's run stage sets no MALLOC_CONF");
  return conf;
}

/** jemalloc's totals at one moment (bytes), from the summary line of its statistics. */
export interface JemallocTotals {
  allocated: number;
  active: number;
  metadata: number;
  resident: number;
  mapped: number;
  retained: number;
}

/**
 * MALLOC_CONF options that make jemalloc print its totals on stderr about every `intervalBytes` allocated (its
 * `stats_interval`), and only them: every other part of its statistics left out (`stats_interval_opts`). What each
 * total means is in jemalloc's manual (`stats.allocated`, `stats.resident`...).
 */
export function jemallocTotalsConf(intervalBytes: number): string {
  return `stats_interval:${intervalBytes},stats_interval_opts:gmdablxeh`;
}

const totalsLine = /^Allocated: (\d+), active: (\d+), metadata: (\d+) \(n_thp \d+\), resident: (\d+), mapped: (\d+), retained: (\d+)$/gm;

/** The totals lines in a piece of jemalloc's stderr output, in order. */
export function parseJemallocTotals(text: string): JemallocTotals[] {
  return [...text.matchAll(totalsLine)].map((m) => {
    const [allocated, active, metadata, resident, mapped, retained] = m.slice(1).map(Number) as [number, number, number, number, number, number];
    return { allocated, active, metadata, resident, mapped, retained };
  });
}
