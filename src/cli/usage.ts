import { CliError, type CliContext, type Command, type CommandResult } from "./command.ts";
import { findAccount } from "../keys/lifecycle.ts";
import { options, str, table, withStore } from "./store-support.ts";
import { spendOf } from "../config/money.ts";

const usage = `usage: modelgate usage [--account NAME|ID] [--daily] [--csv] [--json]
  Requests, prompt tokens, completion tokens and spend per account, key, model and endpoint (all time);
  --daily: per UTC day, key and model; --csv: the daily lines as CSV. Spend is exact: micro-units of the
  config's currency (each line's tokens × its model's pricing per million tokens, rounded half up once).

example:
  modelgate usage --account acme --daily --csv > usage.csv`;

export const usageCommand: Command = {
  name: "usage",
  summary: "Show recorded usage per key, model and endpoint",
  usage,
  async run(args: string[], ctx: CliContext): Promise<CommandResult> {
    if (args[0] === "--help" || args[0] === "-h") throw new CliError("usage", usage);
    const { options: o, positionals } = options(args, { account: "string", daily: "boolean", csv: "boolean" }, usage);
    if (positionals.length) throw new CliError("invalid_argument", `unexpected argument ${positionals[0]}\n${usage}`);
    const daily = o.daily === true || o.csv === true;
    const config = ctx.config;
    const found = await withStore(ctx, async (store) => {
      const account = str(o.account);
      const accountId = account ? (await findAccount(store, account)).id : undefined;
      return daily ? { daily: await store.usage.daily(accountId) } : { summary: await store.usage.summary(accountId) };
    });
    if (found.daily) {
      const rows = found.daily.map((r) => ({ ...r, ...spendOf(config, r) }));
      if (o.csv === true) {
        const lines = [["day", "account_id", "key_id", "model", "requests", "prompt_tokens", "completion_tokens", "spend", "currency"], ...rows.map((r) => [r.day, r.accountId, r.keyId, r.model, r.requests, r.promptTokens, r.completionTokens, r.spend, r.currency])];
        return { json: rows, text: lines.map((l) => l.join(",")).join("\n") };
      }
      const text = rows.length
        ? table([
            ["DAY", "ACCOUNT", "KEY", "MODEL", "REQUESTS", "PROMPT-TOKENS", "COMPLETION-TOKENS", `SPEND-${config.currency}`],
            ...rows.map((r) => [r.day, r.accountId, r.keyId, r.model, String(r.requests), String(r.promptTokens), String(r.completionTokens), r.spend]),
          ])
        : "no usage recorded";
      return { json: rows, text };
    }
    const rows = found.summary!.map((r) => ({ ...r, ...spendOf(config, r) }));
    const text = rows.length
      ? table([
          ["ACCOUNT", "KEY", "MODEL", "ENDPOINT", "REQUESTS", "PROMPT-TOKENS", "COMPLETION-TOKENS", `SPEND-${config.currency}`],
          ...rows.map((r) => [r.accountName, r.keyId, r.model, r.endpoint, String(r.requests), String(r.promptTokens), String(r.completionTokens), r.spend]),
        ])
      : "no usage recorded";
    return { json: rows, text };
  },
};
