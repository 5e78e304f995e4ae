import { createHash, type Hash } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, open, readFile, rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { HubError, type HubClient } from "./hub-client.ts";

export interface DownloadTarget {
  url: string;
  /** Final path; the bytes go to `<dest>.partial` first and are renamed once verified. */
  dest: string;
  size: number | null;
  sha256: string | null;
  gitSha1: string | null;
  /** Shown in progress and errors, e.g. `Qwen/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf`. */
  label: string;
}

export interface DownloadEvents {
  start(label: string, total: number | null, resumedFrom: number): void;
  bytes(count: number): void;
  done(label: string): void;
}

export interface DownloadResult {
  bytes: number;
  resumedFrom: number;
  verified: "sha256" | "git-sha1" | "size" | "none";
}

export class VerifyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "VerifyError";
  }
}

export interface DownloadOptions {
  signal?: AbortSignal;
  /** Give up on a connection that sends nothing for this long, then retry from where it stopped. */
  idleTimeoutMs?: number;
  retries?: number;
}

export function partialPath(dest: string): string {
  return `${dest}.partial`;
}

async function fileSize(file: string): Promise<number | null> {
  try {
    return (await stat(file)).size;
  } catch {
    return null;
  }
}

async function feedFile(hash: Hash, file: string): Promise<void> {
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
}

/** sha256 of a file, or git's blob sha1 (`blob <size>\0<content>`) when `git` is set. */
export async function hashFile(file: string, kind: "sha256" | "git-sha1"): Promise<string> {
  const hash = createHash(kind === "sha256" ? "sha256" : "sha1");
  if (kind === "git-sha1") hash.update(`blob ${(await stat(file)).size}\0`);
  await feedFile(hash, file);
  return hash.digest("hex");
}

function newHash(target: DownloadTarget, total: number | null): { hash: Hash; kind: "sha256" | "git-sha1" } | null {
  if (target.sha256) return { hash: createHash("sha256"), kind: "sha256" };
  if (target.gitSha1 && total !== null) {
    const hash = createHash("sha1");
    hash.update(`blob ${total}\0`);
    return { hash, kind: "git-sha1" };
  }
  return null;
}

/** Checks a file already in place against what the hub says (size, then hash). */
export async function isVerifiedCopy(target: DownloadTarget): Promise<boolean> {
  const size = await fileSize(target.dest);
  if (size === null) return false;
  if (target.size !== null && size !== target.size) return false;
  if (target.sha256) return (await hashFile(target.dest, "sha256")) === target.sha256;
  if (target.gitSha1) return (await hashFile(target.dest, "git-sha1")) === target.gitSha1;
  return true;
}

async function attempt(client: HubClient, target: DownloadTarget, events: DownloadEvents, options: DownloadOptions): Promise<DownloadResult> {
  const partial = partialPath(target.dest);
  await mkdir(path.dirname(target.dest), { recursive: true });
  let start = (await fileSize(partial)) ?? 0;
  if (target.size !== null && start > target.size) {
    await rm(partial, { force: true });
    start = 0;
  }

  const idle = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, idle.signal]) : idle.signal;
  let idleTimer: NodeJS.Timeout | undefined;
  const idleMs = options.idleTimeoutMs ?? 60_000;
  const armIdle = () => {
    clearTimeout(idleTimer);
    idleTimer = setTimeout(() => idle.abort(new HubError("hub_unreachable", `${target.label}: no data for ${idleMs / 1000}s`)), idleMs);
  };

  const complete = target.size !== null && start === target.size && start > 0;
  let res: Response | null = null;
  if (!complete) {
    armIdle();
    try {
      res = await client.request(target.url, { method: "GET", signal, headers: start > 0 ? { range: `bytes=${start}-` } : {} });
    } catch (err) {
      clearTimeout(idleTimer);
      throw signal.aborted ? signal.reason : err;
    }
    if (res.status === 416) {
      // The partial is not a prefix we can extend: start over.
      await res.body?.cancel();
      await rm(partial, { force: true });
      clearTimeout(idleTimer);
      return attempt(client, target, events, options);
    }
    if (res.status === 200 && start > 0) start = 0;
    else if (res.status === 206) {
      const range = /^bytes (\d+)-/.exec(res.headers.get("content-range") ?? "");
      if (!range || Number(range[1]) !== start) {
        await res.body?.cancel();
        clearTimeout(idleTimer);
        throw new HubError("hub_error", `${target.label}: the server resumed at the wrong offset (${res.headers.get("content-range")})`);
      }
    } else if (!res.ok) {
      await res.body?.cancel();
      clearTimeout(idleTimer);
      throw new HubError(res.status === 401 || res.status === 403 ? "hub_unauthorized" : res.status === 404 ? "hub_not_found" : "hub_error",
        `${target.label}: download answered ${res.status} ${res.statusText}`);
    }
  }

  let total = target.size;
  if (total === null && res) {
    const length = res.headers.get("content-length");
    if (length && /^[0-9]+$/.test(length)) total = start + Number(length);
  }
  const hasher = newHash(target, total);
  if (hasher && start > 0) await feedFile(hasher.hash, partial);

  events.start(target.label, total, start);
  let written = start;
  if (res?.body) {
    const handle = await open(partial, start > 0 ? "a" : "w");
    try {
      // Network chunks are small (16-64 KB): gather about 1 MB per write so the disk is not the bottleneck. Writes
      // are chained in order; a stalled connection still gets its bytes on disk after 200 ms, ready to resume from.
      let pending: Uint8Array[] = [];
      let pendingBytes = 0;
      let chain: Promise<unknown> = Promise.resolve();
      let flushTimer: NodeJS.Timeout | undefined;
      const flush = () => {
        clearTimeout(flushTimer);
        flushTimer = undefined;
        if (pendingBytes > 0) {
          const buffer = pending.length === 1 ? pending[0] : Buffer.concat(pending, pendingBytes);
          pending = [];
          pendingBytes = 0;
          chain = chain.then(() => handle.write(buffer));
        }
        return chain;
      };
      try {
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          armIdle();
          hasher?.hash.update(chunk);
          pending.push(chunk);
          pendingBytes += chunk.byteLength;
          written += chunk.byteLength;
          events.bytes(chunk.byteLength);
          if (pendingBytes >= 1 << 20) await flush();
          else flushTimer ??= setTimeout(() => void flush().catch(() => {}), 200);
        }
      } finally {
        await flush();
      }
      await handle.sync();
    } catch (err) {
      throw signal.aborted ? signal.reason : err;
    } finally {
      clearTimeout(idleTimer);
      await handle.close();
    }
  }
  clearTimeout(idleTimer);

  if (total !== null && written !== total) {
    if (written > total) await rm(partial, { force: true });
    throw new HubError("hub_unreachable", `${target.label}: the download stopped at ${written} of ${total} bytes`);
  }
  let verified: DownloadResult["verified"] = target.size !== null ? "size" : "none";
  if (hasher) {
    const actual = hasher.hash.digest("hex");
    const expected = hasher.kind === "sha256" ? target.sha256 : target.gitSha1;
    if (actual !== expected) {
      await rm(partial, { force: true });
      throw new VerifyError(
        `${target.label}: ${hasher.kind} mismatch (expected ${expected}, got ${actual}); the corrupt download was deleted, run the pull again`,
      );
    }
    verified = hasher.kind;
  }
  await rename(partial, target.dest);
  events.done(target.label);
  return { bytes: written - start, resumedFrom: start, verified };
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * One writer per `.partial`: a second `modelgate pull` of the same file (another terminal, `serve --pull`) would
 * interleave bytes. The lock holds the owner's pid; a lock whose process is gone is taken over.
 */
async function lockPartial(dest: string, label: string): Promise<() => Promise<void>> {
  const lock = `${partialPath(dest)}.lock`;
  await mkdir(path.dirname(dest), { recursive: true });
  for (let i = 0; i < 2; i++) {
    try {
      const handle = await open(lock, "wx");
      await handle.writeFile(String(process.pid));
      await handle.close();
      return () => rm(lock, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const owner = Number((await readFile(lock, "utf8").catch(() => "")).trim());
      if (owner && owner !== process.pid && processAlive(owner)) {
        throw new HubError("hub_error", `${label}: another pull (pid ${owner}) is downloading this file; wait for it or stop it`);
      }
      await rm(lock, { force: true });
    }
  }
  throw new HubError("hub_error", `${label}: cannot lock ${lock}`);
}

/**
 * Downloads to `<dest>.partial`, resuming from its size with a Range request, verifies size and hash, and renames
 * into place. Transient failures (connection lost, stalled) are retried from where they stopped.
 */
export async function downloadFile(client: HubClient, target: DownloadTarget, events: DownloadEvents, options: DownloadOptions = {}): Promise<DownloadResult> {
  const retries = options.retries ?? 3;
  const unlock = await lockPartial(target.dest, target.label);
  try {
    for (let i = 0; ; i++) {
      try {
        return await attempt(client, target, events, options);
      } catch (err) {
        const transient = err instanceof HubError ? err.code === "hub_unreachable" : !(err instanceof VerifyError) && (err as Error).name !== "AbortError";
        if (!transient || i >= retries || options.signal?.aborted) throw err;
        await new Promise((resolve) => setTimeout(resolve, 500 * 2 ** i));
      }
    }
  } finally {
    await unlock();
  }
}
