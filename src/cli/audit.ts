import { CliError, type CliContext, type Command, type CommandResult } from "./command.ts";
import { findAccount } from "../keys/lifecycle.ts";
import { options, str, table, withStore } from "./store-support.ts";

const usage = `usage: modelgate audit [--account NAME|ID] [--action ACTION] [--limit N] [--json]
  The audit log, newest first: every account and key operation, from the console, the CLI and the admin API, with
  its actor, the contact it was done on behalf of, the account, the key id (never a key value) and the address.

example:
  modelgate audit --account acme --action key.revoke`;

export const auditCommand: Command = {
  name: "audit",
  summary: "Show the audit log of account and key operations",
  usage,
  async run(args: string[], ctx: CliContext): Promise<CommandResult> {
    if (args[0] === "--help" || args[0] === "-h") throw new CliError("usage", usage);
    const { options: o, positionals } = options(args, { account: "string", action: "string", limit: "string" }, usage);
    if (positionals.length) throw new CliError("invalid_argument", `unexpected argument ${positionals[0]}\n${usage}`);
    const limit = o.limit === undefined ? 100 : Number(o.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new CliError("invalid_argument", `--limit must be an integer from 1 to 10000\n${usage}`);
    const entries = await withStore(ctx, async (store) => {
      const account = str(o.account);
      const accountId = account ? (await findAccount(store, account)).id : undefined;
      return store.audit.list({ account: accountId, action: str(o.action), limit });
    });
    const text = entries.length
      ? table([
          ["TIME", "ACTOR", "ON-BEHALF-OF", "ACTION", "ACCOUNT", "KEY", "SOURCE"],
          ...entries.map((e) => [e.at, e.actor, e.onBehalfOf ?? "-", e.action, e.accountId ?? "-", e.keyId ?? "-", e.source ?? "-"]),
        ])
      : "no audit entries";
    return { json: entries, text };
  },
};
