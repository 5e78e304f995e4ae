import { hostname, userInfo } from "node:os";
import pino from "pino";
import type { FastifyBaseLogger } from "fastify";
import { CliError, type CliContext } from "./command.ts";
import { parseOptions } from "./args.ts";
import { openStore, type OpenStoreOptions, type Store } from "../store/store.ts";
import { LifecycleError, type AuditContext } from "../keys/lifecycle.ts";

/** Opens the store with a silent logger, runs `fn`, closes the store; lifecycle errors become CLI errors. */
export async function withStore<T>(ctx: CliContext, fn: (store: Store) => Promise<T>, storeOptions: OpenStoreOptions = {}): Promise<T> {
  const log = pino({ level: "silent" }) as unknown as FastifyBaseLogger;
  let store: Store;
  try {
    store = await openStore(ctx.config, log, storeOptions);
  } catch (err) {
    throw new CliError("store_unavailable", `cannot open the store: ${(err as Error).message}`);
  }
  try {
    return await fn(store);
  } catch (err) {
    if (err instanceof LifecycleError) throw new CliError(err.code === "not_found" ? "not_found" : "invalid_argument", err.message);
    throw err;
  } finally {
    await store.close();
  }
}

/** parseOptions with CLI errors carrying the usage text. */
export function options(args: string[], known: Record<string, "string" | "boolean">, usage: string): ReturnType<typeof parseOptions> {
  try {
    return parseOptions(args, { json: "boolean", ...known });
  } catch (err) {
    throw new CliError("invalid_argument", `${(err as Error).message}\n${usage}`);
  }
}

/** "a,b, c" -> ["a","b","c"]; an option given as a boolean or missing -> undefined. */
export function list(value: string | boolean | undefined): string[] | undefined {
  if (typeof value !== "string") return undefined;
  return value.split(",").map((v) => v.trim()).filter(Boolean);
}

export function str(value: string | boolean | undefined): string | undefined {
  return typeof value === "string" ? value : undefined;
}

export function table(rows: string[][]): string {
  const widths = rows[0].map((_, col) => Math.max(...rows.map((r) => r[col].length)));
  return rows.map((r) => r.map((cell, col) => (col === r.length - 1 ? cell : cell.padEnd(widths[col]))).join("  ")).join("\n");
}

export function usageError(sub: string | undefined, usage: string): CliError {
  if (sub === undefined || sub === "--help" || sub === "-h" || sub === "help") return new CliError("usage", usage);
  return new CliError("invalid_argument", `unknown subcommand "${sub}"\n${usage}`);
}

/**
 * Where a CLI operation comes from, for the audit log's source: it has no client address, so the local user and
 * host that ran it (`local:ops@gw-1`).
 */
function localSource(): string {
  let user: string;
  try {
    user = userInfo().username;
  } catch {
    // A container user without a passwd entry has no name.
    user = `uid-${process.getuid?.() ?? "unknown"}`;
  }
  return `local:${user}@${hostname()}`;
}

/** The audit context of a CLI operation: actor `cli`, and the `--on-behalf-of` contact when given. */
export function cliAudit(o: Record<string, string | boolean | undefined>): AuditContext {
  return { actor: "cli", onBehalfOf: str(o["on-behalf-of"]) ?? null, source: localSource() };
}
