import type { AppConfig } from "../../src/config/app-config.ts";
import type { Server } from "../../src/server.ts";
import { openStore } from "../../src/store/store.ts";
import { silentLogger } from "../../harness/keys.ts";

/**
 * The usage a key has recorded, as [model, endpoint, requests, promptTokens, completionTokens] rows, read from the
 * server's own store after its pending batch is flushed.
 */
export async function usageRows(server: Server, config: AppConfig, accountId: string, keyId: string): Promise<[string, string, number, number, number][]> {
  await server.ctx.usage.flush();
  const store = await openStore(config, silentLogger());
  try {
    const rows = (await store.usage.summary(accountId)).filter((r) => r.keyId === keyId);
    return rows.map((r) => [r.model, r.endpoint, r.requests, r.promptTokens, r.completionTokens]);
  } finally {
    await store.close();
  }
}
