import type { FastifyBaseLogger } from "fastify";
import type { AppConfig } from "./app-config.ts";

/**
 * SIGHUP (issue 47): the running config takes the new file's plans. Every path reads `config.plans` when it
 * resolves a key (the key cache holds a resolved key for 500 ms; a batch's key for 1 s), so keys and accounts
 * already known get the changed limits within a second, on this replica. An account whose plan the new file drops
 * is refused (500, logged) until its plan is back or it is moved; a concurrency limit in a config that had none at
 * start is counted per replica until a restart (the shared counter is chosen at start).
 */
export function reloadPlans(running: AppConfig, next: AppConfig, log: FastifyBaseLogger): void {
  const dropped = [...running.plans.keys()].filter((name) => !next.plans.has(name));
  if (dropped.length > 0) log.warn({ plans: dropped }, "configuration reload removed plans; accounts on them are refused until they are moved");
  running.plans = next.plans;
}
