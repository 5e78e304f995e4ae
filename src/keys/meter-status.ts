import type { AppConfig } from "../config/app-config.ts";
import { costMicro, formatMoney } from "../config/money.ts";
import { calendarPeriod } from "../config/periods.ts";
import type { Account } from "../store/accounts.repo.ts";
import type { Store } from "../store/store.ts";
import { effectivePlan } from "./effective-plan.ts";

/** An account's token limits, quota and budget, with what is left of the current period (issue 32). */
export interface MeterStatus {
  tokenLimit: { tokens: number; window: string } | null;
  accountTokenLimit: { tokens: number; window: string } | null;
  quota: { tokens: number; period: "day" | "month"; used: number; left: number; resetsAt: string } | null;
  budget: {
    amount: string;
    amountMicros: number;
    period: "day" | "month";
    spent: string;
    spentMicros: number;
    left: string;
    leftMicros: number;
    currency: string;
    resetsAt: string;
    /** `account`: the account's own budget (CLI, admin API, console); `plan`: its plan's. */
    source: "plan" | "account";
  } | null;
}

/** A window as the config writes it: 60000 → "1m". */
function formatDurationLabel(ms: number): string {
  for (const [unit, size] of [["h", 3_600_000], ["m", 60_000], ["s", 1000]] as const) if (ms % size === 0) return `${ms / size}${unit}`;
  return `${ms}ms`;
}

const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z");

/**
 * What the usage table says of the account's current periods: recorded usage, so up to a couple of seconds behind
 * the live counters (usage is written in batches), and without the reservations in flight.
 */
export async function meterStatus(store: Store, config: AppConfig, account: Account): Promise<MeterStatus> {
  const plan = effectivePlan(config, account);
  const status: MeterStatus = { tokenLimit: null, accountTokenLimit: null, quota: null, budget: null };
  if (!plan) return status;
  if (plan.tokenLimit) status.tokenLimit = { tokens: plan.tokenLimit.tokens, window: formatDurationLabel(plan.tokenLimit.windowMs) };
  if (plan.accountTokenLimit) status.accountTokenLimit = { tokens: plan.accountTokenLimit.tokens, window: formatDurationLabel(plan.accountTokenLimit.windowMs) };
  if (plan.quota) {
    const p = calendarPeriod(plan.quota.period);
    const rows = await store.usage.periodTotals(account.id, p.firstDay, p.lastDay);
    const used = rows.reduce((n, r) => n + r.promptTokens + r.completionTokens, 0);
    status.quota = { tokens: plan.quota.tokens, period: plan.quota.period, used, left: Math.max(0, plan.quota.tokens - used), resetsAt: iso(p.endsAt) };
  }
  const budget = plan.budget;
  if (budget) {
    const p = calendarPeriod(budget.period);
    const rows = await store.usage.periodTotals(account.id, p.firstDay, p.lastDay);
    const pricing = (model: string) => config.models.find((m) => m.id === model)?.pricing ?? null;
    const spentMicros = rows.reduce((n, r) => n + costMicro(pricing(r.model), r.promptTokens, r.completionTokens, "ceil"), 0);
    const leftMicros = Math.max(0, budget.amountMicro - spentMicros);
    status.budget = {
      amount: formatMoney(budget.amountMicro),
      amountMicros: budget.amountMicro,
      period: budget.period,
      spent: formatMoney(spentMicros),
      spentMicros,
      left: formatMoney(leftMicros),
      leftMicros,
      currency: config.currency,
      resetsAt: iso(p.endsAt),
      source: account.budget ? "account" : "plan",
    };
  }
  return status;
}

/** The status as lines for `modelgate accounts show`. */
export function describeMeterStatus(s: MeterStatus): string[] {
  const lines: string[] = [];
  lines.push(`token limit per key:     ${s.tokenLimit ? `${s.tokenLimit.tokens} tokens per ${s.tokenLimit.window}` : "none"}`);
  lines.push(`token limit per account: ${s.accountTokenLimit ? `${s.accountTokenLimit.tokens} tokens per ${s.accountTokenLimit.window}` : "none"}`);
  lines.push(`token quota:             ${s.quota ? `${s.quota.tokens} tokens per ${s.quota.period}: ${s.quota.used} used, ${s.quota.left} left (resets ${s.quota.resetsAt})` : "none"}`);
  lines.push(
    `budget:                  ${
      s.budget
        ? `${s.budget.amount} ${s.budget.currency} per ${s.budget.period} (${s.budget.source === "account" ? "the account's own" : "the plan's"}): ${s.budget.spent} spent, ${s.budget.left} left (resets ${s.budget.resetsAt})`
        : "none"
    }`,
  );
  return lines;
}
