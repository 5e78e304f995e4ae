import fp from "fastify-plugin";
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from "fastify";
import type { AuthContext } from "./auth-context.ts";
import { AppError } from "../errors/app-error.ts";
import { resolveKey, type ResolvedKey } from "./effective-limits.ts";
import { isWellFormedKey } from "../keys/key-format.ts";
import { hashKey } from "../store/key-secret.ts";
import { bearerToken } from "./bearer.ts";
import type { Store } from "../store/store.ts";
import { isStoreBusy, isStoreUnreachable } from "../store/store-health.ts";
import { AuthAudit } from "./auth-audit.ts";
import { UnknownKeys } from "../keys/unknown-keys.ts";

/** API-key authentication, decorated on the app as `apiKeys`; the /v1 scope runs it as its first hook. */
export interface ApiKeyAuth {
  /**
   * Treats a key as revoked from now on in every cache of this node (a revocation made here, published by any
   * replica, or pending in Redis), also while the database is unreachable.
   */
  forget(keyId: string): void;
  /** A key was created: unknown keys remembered by this node are looked up again. */
  keyCreated(): void;
  /**
   * An onRequest hook for a scope whose clients send their key where `reader` finds it: sets `request.auth` from a
   * valid key, or refuses with 401 invalid_api_key (counted by the anonymous limiter).
   */
  authenticateWith(reader: KeyReader): (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void;
  /** An onRequest hook: 403 ip_not_allowed when the key's account has an allowlist the client address is outside. */
  checkIpAllowlist(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void;
}

/** Where a scope's clients send their key, and what a request without one is told. */
export interface KeyReader {
  read(request: FastifyRequest): string | null;
  missing: string;
}

/** A key in `Authorization: Bearer <key>`, else in `x-api-key` (where Anthropic's SDKs send it, to /v1/models too). */
function readKey(request: FastifyRequest): string | null {
  const bearer = bearerToken(request.headers.authorization);
  if (bearer !== null) return bearer;
  const key = request.headers["x-api-key"];
  return typeof key === "string" && key.length > 0 ? key : null;
}

/** /v1's clients. */
export const bearerKey: KeyReader = { read: readKey, missing: "Missing API key: send Authorization: Bearer <API_KEY>." };

/** Anthropic's clients (/v1/messages): the same headers, and the missing key named as they send it. */
export const anthropicKey: KeyReader = { read: readKey, missing: "Missing API key: send x-api-key: <API_KEY> (or Authorization: Bearer <API_KEY>)." };

declare module "fastify" {
  interface FastifyRequest {
    /** Set by the /v1 scope's auth hook on requests with a valid key; null otherwise. */
    auth: AuthContext | null;
  }
  interface FastifyInstance {
    apiKeys: ApiKeyAuth;
    /** The accounts/keys/usage store, for the admin API. */
    keyStore: Store;
    /** The `auth.*` audit entries (console logins, failed admin-token attempts). */
    authAudit: AuthAudit;
  }
}

/** How long a found key is trusted without a new read: a revocation is seen within this time (the issue says 1 s). */
export const keyCacheTtlMs = 500;
const keyCacheMax = 10_000;
/** last_used_at is written at most this often per key, in batches. */
const touchEveryMs = 60_000;
const touchFlushMs = 1_000;

interface CachedKey {
  expiresAt: number;
  auth: AuthContext;
  revoked: boolean;
  /** Whether the key's deployment binding lets this node serve it. */
  servesHere: boolean;
}

/**
 * Keys by their last answer from the database (valid or revoked), kept for `store.staleIfError` in case it becomes
 * unreachable: a key last seen valid keeps working, one last seen revoked stays refused.
 */
const lastSeenMax = 50_000;
/** How long a published revocation is remembered locally (past any stale window, until the database has it). */
const revokedMemoryMs = 24 * 60 * 60 * 1000;

export const authPlugin = fp(
  async (app, opts: { store: Store }) => {
    const { store } = opts;
    const config = app.ctx.config;
    // Per-instance state (never module-level): the short positive cache and the last_used_at batch.
    const cache = new Map<string, CachedKey>();
    const lastSeen = new Map<string, { entry: CachedKey; seenAt: number }>();
    const revokedIds = new Map<string, number>();
    const unknownKeys = new UnknownKeys();
    const lastTouched = new Map<string, number>();
    let pendingTouch = new Set<string>();

    async function flushTouches(): Promise<void> {
      if (pendingTouch.size === 0) return;
      const ids = [...pendingTouch];
      pendingTouch = new Set();
      try {
        await store.health.run(() => store.keys.touch(ids, new Date().toISOString()));
      } catch (err) {
        // An outage is logged once by the store's health; last_used_at of that second is not worth buffering.
        if (!isStoreUnreachable(err)) app.log.warn({ err }, "could not record key last_used_at");
      }
    }
    const touchTimer = setInterval(() => void flushTouches(), touchFlushMs);
    touchTimer.unref();
    app.ctx.onClose(async () => {
      clearInterval(touchTimer);
      await flushTouches();
    });

    app.decorate("keyStore", store);
    app.decorateRequest("auth", null);
    const authAudit = new AuthAudit((entry) => store.health.run(() => store.audit.append(entry)), app.log);
    app.decorate("authAudit", authAudit);
    // Closers run last registered first: the window's summary is written before the store closes.
    app.ctx.onClose(() => authAudit.close());

    /**
     * Keys found in the store are cached (by value, for under a second, in this process's memory). A key the store
     * does not hold is remembered as unknown for a few seconds (by its hash): a flood of made-up keys costs one
     * read each, however often they are repeated. A key created a moment ago works on its very next request: only
     * a "not found" answer is remembered, and no value can be sent before its key exists.
     */
    async function lookup(key: string, hash: string, now: number): Promise<CachedKey | null> {
      let found;
      try {
        found = await store.health.run(() => store.keys.findByHash(hash));
      } catch (err) {
        if (isStoreBusy(err)) throw new AppError("overloaded", { message: "The key store is busy, so this key cannot be checked now; retry shortly.", retryAfterMs: 1000 });
        if (!isStoreUnreachable(err)) throw err;
        // The database is away: a key seen within staleIfError keeps its last answer; any other key cannot be checked.
        const seen = lastSeen.get(key);
        if (seen && now - seen.seenAt <= config.staleIfErrorMs) return seen.entry;
        throw new AppError("overloaded", { message: "The key store is unreachable, so this key cannot be checked now; retry shortly.", retryAfterMs: 2000 });
      }
      if (!found) {
        cache.delete(key);
        lastSeen.delete(key);
        unknownKeys.add(hash, now);
        return null;
      }
      let resolved: ResolvedKey;
      try {
        resolved = resolveKey(config, found);
      } catch (err) {
        app.log.error({ account: found.account.id, plan: found.account.plan }, "account's plan is not in the config");
        throw err;
      }
      const entry: CachedKey = {
        expiresAt: now + keyCacheTtlMs,
        revoked: resolved.revoked || revokedIds.has(found.key.id),
        servesHere: resolved.servesHere,
        auth: resolved.auth,
      };
      if (cache.size >= keyCacheMax) cache.clear();
      cache.set(key, entry);
      // The last answer replaces the one before: a key found revoked is refused during an outage too.
      if (lastSeen.size >= lastSeenMax) lastSeen.delete(lastSeen.keys().next().value!);
      lastSeen.delete(key);
      lastSeen.set(key, { entry, seenAt: now });
      return entry;
    }

    /** Requests without a usable key are counted per address (and get its headers) before they are refused. */
    async function refuse(request: FastifyRequest, reply: FastifyReply, error: AppError): Promise<never> {
      await request.server.limits.anonymous(request, reply);
      throw error;
    }

    /** Lookups under way, by key: requests for the same key at the same time share one (a burst, a cache expiry). */
    const inflight = new Map<string, Promise<CachedKey | null | "no answer">>();

    /**
     * A well-formed key not in the short cache. A key this node has never had an answer for is counted by the
     * anonymous limiter before the database is asked (and not counted after all when it is valid), so guessing keys
     * reaches the database at most the anonymous limit per address; a key remembered as unknown does not reach it.
     */
    async function check(request: FastifyRequest, reply: FastifyReply, key: string, now: number): Promise<CachedKey> {
      const hash = hashKey(store.keySecret, key);
      if (unknownKeys.has(hash, now)) return refuse(request, reply, new AppError("invalid_api_key", { message: "Invalid API key." }));
      const shared = inflight.get(key);
      if (shared) {
        const answer = await shared;
        // Without the answer (its request was refused first, or the store failed), this request asks on its own.
        if (answer !== "no answer") return verdict(request, reply, answer, null);
      }
      let settle!: (answer: CachedKey | null | "no answer") => void;
      const mine = new Promise<CachedKey | null | "no answer">((resolve) => (settle = resolve));
      inflight.set(key, mine);
      let attempt: { accepted: () => Promise<void> } | null = null;
      let entry: CachedKey | null;
      try {
        if (!lastSeen.has(key)) attempt = await request.server.limits.anonymousAttempt(request, reply, "key");
        entry = await lookup(key, hash, now);
      } catch (err) {
        settle("no answer");
        // A 503 carries the limiter's headers like every other answer.
        if (!attempt && err instanceof AppError && err.code !== "rate_limit_exceeded") await request.server.limits.anonymousHeadersOnly(request, reply);
        throw err;
      } finally {
        if (inflight.get(key) === mine) inflight.delete(key);
      }
      settle(entry);
      return verdict(request, reply, entry, attempt);
    }

    /** A looked-up key's outcome; a refusal is counted by the anonymous limiter unless `attempt` already was. */
    async function verdict(request: FastifyRequest, reply: FastifyReply, entry: CachedKey | null, attempt: { accepted: () => Promise<void> } | null): Promise<CachedKey> {
      const refusal = (message: string) => new AppError("invalid_api_key", { message });
      const refuseCounted = (error: AppError) => (attempt ? Promise.reject(error) : refuse(request, reply, error));
      if (!entry) return refuseCounted(refusal("Invalid API key."));
      if (entry.revoked || revokedIds.has(entry.auth.keyId)) return refuseCounted(refusal("This API key has been revoked."));
      await attempt?.accepted();
      return entry;
    }

    function authenticateWith(reader: KeyReader) {
      return function authenticate(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
        const key = reader.read(request);
        const now = Date.now();
        const entry = key ? cache.get(key) : undefined;
        // A key found valid under keyCacheTtlMs ago, and usable here, is admitted at once; anything else (a lookup, a
        // refusal) takes the path that may wait.
        if (entry && entry.expiresAt > now && !entry.revoked && !revokedIds.has(entry.auth.keyId) && entry.servesHere) {
          admit(request, entry, now);
          return done();
        }
        authenticateChecked(request, reply, key, now, reader.missing).then(() => done(), done);
      };
    }

    async function authenticateChecked(request: FastifyRequest, reply: FastifyReply, key: string | null, now: number, missing: string): Promise<void> {
      if (!key) {
        return refuse(request, reply, new AppError("invalid_api_key", { message: missing }));
      }
      let entry = cache.get(key);
      if (!(entry && entry.expiresAt > now)) {
        if (!isWellFormedKey(key)) return refuse(request, reply, new AppError("invalid_api_key", { message: "Malformed API key." }));
        entry = await check(request, reply, key, now);
      }
      if (revokedIds.has(entry.auth.keyId)) entry.revoked = true;
      if (entry.revoked) {
        return refuse(request, reply, new AppError("invalid_api_key", { message: "This API key has been revoked." }));
      }
      if (!entry.servesHere) {
        return refuse(request, reply, new AppError("invalid_api_key", { message: "This API key is not valid on this endpoint." }));
      }
      admit(request, entry, now);
    }

    function admit(request: FastifyRequest, entry: CachedKey, now: number): void {
      request.auth = entry.auth;
      const last = lastTouched.get(entry.auth.keyId) ?? 0;
      if (now - last >= touchEveryMs) {
        if (lastTouched.size >= keyCacheMax) lastTouched.clear();
        lastTouched.set(entry.auth.keyId, now);
        pendingTouch.add(entry.auth.keyId);
      }
    }

    function checkIpAllowlist(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
      const auth = request.auth;
      if (!auth?.allowlist || auth.allowlist.allows(request.clientIp)) return done();
      request.log.info({ keyId: auth.keyId, ip: request.clientIp }, "address outside the account's allowlist");
      // Refused before the key's own limit: the anonymous limiter counts it, so outsiders don't use the key's quota.
      request.auth = null;
      refuse(request, reply, new AppError("ip_not_allowed", { message: `Requests from ${request.clientIp} are not allowed for this account.` })).catch(done);
    }

    let nextRevokedSweep = 0;
    function forget(keyId: string): void {
      const now = Date.now();
      const known = revokedIds.has(keyId);
      revokedIds.set(keyId, now + revokedMemoryMs);
      if (now >= nextRevokedSweep) {
        nextRevokedSweep = now + 60_000;
        for (const [id, until] of revokedIds) if (until < now) revokedIds.delete(id);
      }
      // Every answer checks revokedIds; marking the cached entries once is enough (pending revocations come again
      // every few seconds). Marked, not dropped: while the database is away, a dropped key would be "unknown" (503)
      // instead of 401.
      if (known) return;
      for (const entry of cache.values()) if (entry.auth.keyId === keyId) entry.revoked = true;
      for (const seen of lastSeen.values()) if (seen.entry.auth.keyId === keyId) seen.entry.revoked = true;
    }

    app.decorate("apiKeys", { authenticateWith, checkIpAllowlist, forget, keyCreated: () => unknownKeys.clear() });
  },
  { name: "api-keys", dependencies: ["limits"] },
);
