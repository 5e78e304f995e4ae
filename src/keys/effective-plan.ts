import type { AppConfig, Plan } from "../config/app-config.ts";
import type { Account } from "../store/accounts.repo.ts";

/**
 * The plan an account is held to: its configured plan, with the account's own budget (CLI, admin API, console) in
 * place of the plan's (issue 32); null when the plan is not in the config. `resolveKey` (auth/effective-limits.ts)
 * builds every key's limits on it, and the account's status (meter-status.ts) reports it.
 */
export function effectivePlan(config: AppConfig, account: Pick<Account, "plan" | "budget">): Plan | null {
  const configured = config.plans.get(account.plan);
  if (!configured) return null;
  const own = account.budget;
  return own ? { ...configured, budget: { amountMicro: own.amountMicros, period: own.period } } : configured;
}
