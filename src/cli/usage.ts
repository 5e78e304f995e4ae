import { CliError, type CliContext, type Command, type CommandResult } from "./command.ts";
import { findAccount } from "../keys/lifecycle.ts";
import { options, str, table, withStore } from "./store-support.ts";

const usage = `usage: modelgate usage [--account NAME|ID] [--json]
  Requests, prompt tokens and completion tokens per account, key, model and endpoint (all time).

example:
  modelgate usage --account acme --json`;

export const usageCommand: Command = {
  name: "usage",
  summary: "Show recorded usage per key, model and endpoint",
  usage,
  async run(args: string[], ctx: CliContext): Promise<CommandResult> {
    if (args[0] === "--help" || args[0] === "-h") throw new CliError("usage", usage);
    const { options: o, positionals } = options(args, { account: "string" }, usage);
    if (positionals.length) throw new CliError("invalid_argument", `unexpected argument ${positionals[0]}\n${usage}`);
    const rows = await withStore(ctx, async (store) => {
      const account = str(o.account);
      const accountId = account ? (await findAccount(store, account)).id : undefined;
      return store.usage.summary(accountId);
    });
    const text = rows.length
      ? table([
          ["ACCOUNT", "KEY", "MODEL", "ENDPOINT", "REQUESTS", "PROMPT-TOKENS", "COMPLETION-TOKENS"],
          ...rows.map((r) => [r.accountName, r.keyId, r.model, r.endpoint, String(r.requests), String(r.promptTokens), String(r.completionTokens)]),
        ])
      : "no usage recorded";
    return { json: rows, text };
  },
};
