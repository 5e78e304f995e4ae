import type { FastifyBaseLogger } from "fastify";
import type { ChainableCommander, Redis } from "ioredis";
import { connectFailFast } from "./redis-connection.ts";
import { SharedStoreCircuit } from "./shared-store-circuit.ts";

/** A Lua script to define on the connection, as ioredis's defineCommand takes it. */
export interface RedisScript {
  lua: string;
  numberOfKeys?: number;
}

/**
 * How long a command may take. Not less: on a saturated node the event loop alone can delay an answer by hundreds
 * of milliseconds (and a slow Redis adds its own), and a circuit opened then counts every limit per replica, which
 * over-admits across replicas without any outage.
 */
const commandTimeoutMs = 2000;

/**
 * Failed commands in a row that open the circuit: a saturated node (one slow answer among others) is not an outage.
 * Under load an outage still opens it within one command timeout: every command in flight on a dead connection fails
 * at the same time, and while the connection is replaced commands fail at once.
 */
const failuresToOpen = 5;

/**
 * While the circuit is open, a probe (the only command then) that has not answered in this long means the connection
 * is dead (a partition can leave one open): it is replaced, so limits are shared again within a second of Redis
 * returning. A Redis slower than this to answer a PING is not taken back.
 */
const probeTimeoutMs = 500;

export interface SharedRedisOptions {
  /** `redis.onError`: while the circuit is open, `open` counts per replica, `closed` answers 503 overloaded. */
  onError: "open" | "closed";
  log: FastifyBaseLogger;
}

/**
 * The Redis the replicas share their limits in (request limits, token limits, quotas and budgets, concurrency
 * leases), with the one outage policy they all follow:
 * - one connection that fails fast: no offline queue, no retries, a command timeout of 2 s; a command that timed out
 *   replaces the connection only when it answered nothing for the whole timeout (a partition can leave a connection
 *   open but dead; a busy one still answers others);
 * - one circuit (shared-store-circuit.ts): 5 failed commands in a row open it; while it is open no call waits on
 *   Redis: each limiter counts in its local fallback (`onError: open`), starting each window where Redis left off
 *   (`LastSeen`), or the request gets 503 overloaded (`closed`); a background ping closes it again.
 */
export class SharedRedis {
  private readonly circuit: SharedStoreCircuit;
  /** When the connection last answered anything. */
  private lastAnswerAt = Date.now();

  private constructor(
    private readonly redis: Redis,
    onError: "open" | "closed",
    log: FastifyBaseLogger,
  ) {
    this.circuit = new SharedStoreCircuit({
      ping: () => this.probe(),
      onError,
      failuresToOpen,
      log,
      messages: {
        down:
          onError === "open"
            ? "redis unreachable: request limits, token limits, quotas, budgets and concurrency are counted per replica until it returns"
            : "redis unreachable: refusing limited requests (redis.onError: closed) until it returns",
        up: "redis reachable again: limits are shared again",
      },
    });
  }

  /** Connects first, so a wrong REDIS_URL fails the start instead of every request. */
  static async connect(url: string, options: SharedRedisOptions): Promise<SharedRedis> {
    const redis = await connectFailFast(url, commandTimeoutMs);
    return new SharedRedis(redis, options.onError, options.log);
  }

  /** Defines a limiter's scripts on the connection (once per name). */
  defineScripts(scripts: Record<string, RedisScript>): void {
    for (const [name, script] of Object.entries(scripts)) this.redis.defineCommand(name, script);
  }

  /** Runs a script defined by `defineScripts`. */
  script<T>(name: string, ...args: (string | number)[]): Promise<T> {
    const command = (this.redis as unknown as Record<string, (...a: (string | number)[]) => Promise<T>>)[name];
    return this.run(command.apply(this.redis, args));
  }

  /** Runs the commands `build` queues in one MULTI; its answers as [error, value] pairs. */
  async transaction(build: (multi: ChainableCommander) => ChainableCommander): Promise<[Error | null, unknown][]> {
    return (await this.run(build(this.redis.multi()).exec())) ?? [];
  }

  /** The shared call while the circuit is closed; on its failure, or while it is open, the outage policy decides. */
  guarded<T>(shared: () => Promise<T>, local: () => T | Promise<T>): Promise<T> {
    return this.circuit.guarded(shared, local);
  }

  /** A call not worth failing a request for (a refund, a renewal): local while the circuit is open, errors dropped. */
  bestEffort(shared: () => Promise<unknown>, local: () => void): Promise<void> {
    return this.circuit.bestEffort(shared, local);
  }

  /** Whether the limits are shared (false while the circuit is open). */
  get healthy(): boolean {
    return this.circuit.healthy;
  }

  /** Calls `listener` on each failed call to Redis (metrics). */
  onFailure(listener: () => void): void {
    this.circuit.onFailure(listener);
  }

  /** A timed-out command replaces the connection when it has answered nothing for `silentMs`. */
  private async run<T>(command: Promise<T>, silentMs = commandTimeoutMs): Promise<T> {
    try {
      const answer = await command;
      this.lastAnswerAt = Date.now();
      return answer;
    } catch (err) {
      // Destroyed, not ended: a graceful close would wait seconds for a peer that does not answer. ioredis then
      // reconnects by its retryStrategy.
      if (/timed out/i.test((err as Error).message) && Date.now() - this.lastAnswerAt >= silentMs) this.redis.stream?.destroy();
      throw err;
    }
  }

  private async probe(): Promise<void> {
    const ping = this.redis.ping();
    ping.catch(() => {});
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error("the probe timed out")), probeTimeoutMs)));
    try {
      await this.run(Promise.race([ping, late]), probeTimeoutMs);
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    this.circuit.close();
    this.redis.disconnect();
  }
}

/** Entries `LastSeen` keeps at most, least recently seen dropped first (as the memory stores' buckets). */
const maxSeen = 100_000;

/**
 * What Redis last said of each window a limiter counts in (how much was used, when it ends), so that its fallback
 * starts there when the circuit opens: a blip in a window that was full admits what was left, not a fresh window.
 */
export class LastSeen<T extends { until: number }> {
  private readonly seen = new Map<string, T>();

  remember(bucket: string, value: T): void {
    this.seen.delete(bucket);
    this.seen.set(bucket, value);
    if (this.seen.size > maxSeen) this.seen.delete(this.seen.keys().next().value!);
  }

  /** The last value, unless its window has ended. */
  get(bucket: string, now = Date.now()): T | undefined {
    const value = this.seen.get(bucket);
    return value && value.until > now ? value : undefined;
  }
}
