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
