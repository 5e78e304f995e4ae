import fp from "fastify-plugin";
import { writePendingRevocations } from "../keys/lifecycle.ts";
import { RedisRevocationBus, type RevocationBus } from "../keys/revocation-bus.ts";
import type { Store } from "../store/store.ts";
import "../auth/api-key.plugin.ts";

declare module "fastify" {
  interface FastifyInstance {
    /** Publishes revocations to every replica (Redis); null without Redis. */
    revocations: RevocationBus | null;
  }
}

const applyEveryMs = 2_000;

/**
 * With Redis: every replica drops a revoked key from its caches the moment any replica (or the CLI) publishes the
 * revocation, and revocations accepted while the database was away are written once it answers again, by
 * whichever replica gets there first, each with its audit entry in the same transaction.
 */
export const revocationsPlugin = fp(
  async (app, opts: { redisUrl: string | null; store: Store }) => {
    if (!opts.redisUrl) {
      app.decorate("revocations", null);
      return;
    }
    const bus = await RedisRevocationBus.connect(opts.redisUrl);
    await bus.subscribe((keyId) => app.apiKeys.forget(keyId));
    app.decorate("revocations", bus);

    const { store } = opts;
    const apply = async () => {
      let pending: Map<string, string>;
      try {
        pending = await bus.pending();
      } catch {
        return;
      }
      // In effect here before (and whether or not) this replica is the one that writes it: a replica that missed
      // the published message, or started after it, refuses the key within applyEveryMs all the same.
      for (const keyId of pending.keys()) app.apiKeys.forget(keyId);
      // A failure (Redis or the database still away) is retried on the next tick.
      await writePendingRevocations(store, bus, app.log).catch(() => {});
    };
    await apply();
    const timer = setInterval(() => void apply(), applyEveryMs);
    timer.unref();
    app.ctx.onClose(async () => {
      clearInterval(timer);
      await bus.close();
    });
  },
  { name: "revocations", dependencies: ["api-keys"] },
);
