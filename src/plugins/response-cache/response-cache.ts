import { createHash } from "node:crypto";
import { zstdCompressSync, zstdDecompressSync } from "node:zlib";
import type { FastifyBaseLogger } from "fastify";
import type { ResponseCache } from "../../app-context.ts";
import type { AppConfig } from "../../config/app-config.ts";
import { SharedStoreCircuit } from "../rate-limit/shared-store-circuit.ts";
import { MemoryResponseStore, RedisResponseStore, type ResponseStore } from "./response-store.ts";

export interface ResponseCacheOptions {
  config: AppConfig;
  log: FastifyBaseLogger;
  /** Each failed call to Redis (the store-errors metric). */
  onStoreError?(): void;
}

/**
 * Entries whose JSON is shorter are stored as it is: inflating one costs a zstd context (about 190 µs on this
 * machine), more than a small hit's whole lookup otherwise, and saves under 2 KiB of memory.
 */
const compressFromBytes = 2048;
/** The first byte of a stored JSON object; a zstd frame starts with 0x28 (its magic number 0xFD2FB528). */
const jsonStart = 0x7b;

/**
 * The response cache's store (issue 45): values as JSON (compressed with zstd from 2 KiB), under `mg:cache:<deployment>:` plus a
 * hash of the model id (so a model's entries are purged by prefix) and the caller's key. In Redis when `redis.url`
 * is set, shared by the replicas; else in this process's memory, an LRU bounded by `cache.maxBytes`. While Redis
 * cannot answer, the cache is bypassed (`unavailable`): two failed calls in a row open a circuit, one line is logged
 * when it opens and one when Redis answers again, and no request waits on Redis meanwhile.
 */
export class ResponseCacheStore implements ResponseCache {
  private constructor(
    private readonly store: ResponseStore,
    private readonly circuit: SharedStoreCircuit | null,
    private readonly prefix: string,
    private readonly log: FastifyBaseLogger,
  ) {}

  static async create(options: ResponseCacheOptions): Promise<ResponseCacheStore> {
    const { config, log } = options;
    const prefix = `mg:cache:${config.deployment}:`;
    if (!config.redisUrl) return new ResponseCacheStore(new MemoryResponseStore(config.cache.maxBytes), null, prefix, log);
    const redis = new RedisResponseStore(config.redisUrl);
    const circuit = new SharedStoreCircuit({
      ping: () => redis.ping(),
      // The cache is never a reason to refuse: `open` whatever redis.onError says.
      onError: "open",
      failuresToOpen: 2,
      log,
      messages: { down: "redis unreachable: the response cache is bypassed until it returns", up: "redis reachable again: the response cache is back" },
    });
    if (options.onStoreError) circuit.onFailure(options.onStoreError);
    // Connected at start when a model caches (a hit on the first request); otherwise on first use, if ever.
    if (config.models.some((m) => m.cache)) await redis.connection().catch((err: unknown) => log.warn({ err }, "redis unreachable at start: the response cache is bypassed until it answers"));
    return new ResponseCacheStore(redis, circuit, prefix, log);
  }

  private modelPrefix(model: string): string {
    return `${this.prefix}${createHash("sha256").update(model).digest("hex").slice(0, 16)}:`;
  }

  async get(model: string, key: string, maxBytes: number): Promise<unknown | null | "unavailable"> {
    const read = () => this.store.get(this.modelPrefix(model) + key);
    const bytes = this.circuit ? await this.circuit.guarded<Buffer | null | "unavailable">(read, () => "unavailable") : await read();
    if (bytes === null || bytes === "unavailable") return bytes;
    try {
      // Bounded: an entry is never inflated past the largest one this model may store.
      const json = bytes[0] === jsonStart && bytes.length <= maxBytes ? bytes : zstdDecompressSync(bytes, { maxOutputLength: maxBytes });
      return JSON.parse(json.toString("utf8"));
    } catch (err) {
      this.log.warn({ err, model }, "a response cache entry could not be read; it is ignored");
      return null;
    }
  }

  put(model: string, key: string, value: unknown, ttlMs: number, maxBytes: number): boolean {
    const json = Buffer.from(JSON.stringify(value), "utf8");
    if (json.length > maxBytes) return false;
    const write = () => this.store.set(this.modelPrefix(model) + key, json.length < compressFromBytes ? json : zstdCompressSync(json), ttlMs);
    const written = this.circuit ? this.circuit.bestEffort(write, () => {}) : write();
    written.catch((err: unknown) => this.log.warn({ err, model }, "a response cache entry could not be written"));
    return true;
  }

  purge(model: string | null): Promise<number> {
    return this.store.deletePrefix(model === null ? this.prefix : this.modelPrefix(model));
  }

  async close(): Promise<void> {
    this.circuit?.close();
    await this.store.close();
  }
}
