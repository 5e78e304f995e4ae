import type { TenantStats } from "./runner-types.ts";
import type { TenantView } from "./vtc-queue.ts";

/** Seconds of history for the service shares. */
const shareWindowMs = 60_000;
/** Past this many records the oldest half is merged by account, so a busy minute stays bounded. */
const maxRecords = 4096;

/** Tokens served per account over the last minute, for each account's share in the admin view. */
export class ServiceLog {
  private readonly records: { at: number; account: string; tokens: number }[] = [];

  served(account: string, tokens: number): void {
    const now = performance.now();
    this.records.push({ at: now, account, tokens });
    if (this.records.length > maxRecords) this.trim(now);
  }

  /** Tokens per account over the last minute. */
  private byAccount(): Map<string, number> {
    this.trim(performance.now());
    const totals = new Map<string, number>();
    for (const { account, tokens } of this.records) totals.set(account, (totals.get(account) ?? 0) + tokens);
    return totals;
  }

  /** The queue by account, with each account's tokens over the last minute (accounts served then but idle now too). */
  tenants(queued: TenantView[]): TenantStats[] {
    const byAccount = this.byAccount();
    const total = [...byAccount.values()].reduce((a, b) => a + b, 0);
    const views = new Map(queued.map((v) => [v.account, v]));
    for (const account of byAccount.keys()) {
      if (!views.has(account)) views.set(account, { account, weight: 1, waiting: { interactive: 0, batch: 0 }, running: 0, lead: 0 });
    }
    return [...views.values()]
      .map((v) => ({ ...v, tokensLastMinute: byAccount.get(v.account) ?? 0, shareLastMinute: total > 0 ? (byAccount.get(v.account) ?? 0) / total : 0 }))
      .sort((a, b) => b.tokensLastMinute - a.tokensLastMinute || a.account.localeCompare(b.account));
  }

  /** Drops records older than a minute (and, past the bound, merges the oldest half by account). */
  private trim(now: number): void {
    let drop = 0;
    while (drop < this.records.length && now - this.records[drop].at > shareWindowMs) drop++;
    this.records.splice(0, drop);
    if (this.records.length > maxRecords) {
      const old = this.records.splice(0, maxRecords / 2);
      const merged = new Map<string, number>();
      for (const r of old) merged.set(r.account, (merged.get(r.account) ?? 0) + r.tokens);
      const at = old.at(-1)!.at;
      this.records.unshift(...[...merged].map(([account, tokens]) => ({ at, account, tokens })));
    }
  }
}
