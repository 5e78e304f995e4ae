import { CliError, type CliContext, type Command, type CommandResult } from "./command.ts";
import { createAccount, findAccount, listAccounts, updateAccount, type AccountInput, type AccountView } from "../keys/lifecycle.ts";
import { describeMeterStatus, meterStatus } from "../keys/meter-status.ts";
import { cliAudit, list, options, str, table, usageError, withStore } from "./store-support.ts";

const usage = `usage:
  modelgate accounts create NAME [--plan P] [--allow-ip CIDR,...] [--contact EMAIL,...] [--on-behalf-of EMAIL] [--json]
  modelgate accounts update NAME|ID [--plan P] [--allow-ip CIDR,...|--clear-allow-ip] [--contact EMAIL,...] [--rename NEW]
                            [--budget AMOUNT --budget-period day|month|--clear-budget] [--on-behalf-of EMAIL] [--json]
  modelgate accounts list [--json]
  modelgate accounts show NAME|ID [--json]

accounts update --budget AMOUNT --budget-period day|month sets the account's own budget (in the config's
currency, overriding its plan's); --clear-budget goes back to the plan's. accounts show prints the account with
its token limits, quota and budget and what is left of them (from the recorded usage).

--on-behalf-of EMAIL: the change is made at the request of this registered contact of the account (support); it
goes into the audit log, and an address the account has not registered is refused.

example:
  modelgate accounts create acme --plan default --allow-ip 10.0.0.0/8`;

function shape(a: AccountView) {
  // The account's own budget only when it has one (issue 32): the documented shape is otherwise unchanged.
  return { id: a.id, name: a.name, plan: a.plan, allowIps: a.allowIps, ...(a.budget ? { budget: a.budget } : {}) };
}

function describe(a: AccountView): string {
  const ips = a.allowIps.length ? a.allowIps.join(",") : "any address";
  return `account ${a.name} (${a.id}) plan=${a.plan} allow=${ips}${a.contacts.length ? ` contacts=${a.contacts.join(",")}` : ""}`;
}

export const accountsCommand: Command = {
  name: "accounts",
  summary: "Create, update, show and list accounts",
  usage,
  async run(args: string[], ctx: CliContext): Promise<CommandResult> {
    const [sub, ...rest] = args;
    switch (sub) {
      case "create": {
        const { options: o, positionals } = options(rest, { plan: "string", "allow-ip": "string", contact: "string", "on-behalf-of": "string" }, usage);
        if (positionals.length !== 1) throw new CliError("invalid_argument", `accounts create needs exactly one NAME\n${usage}`);
        const account = await withStore(ctx, (store) =>
          createAccount(store, ctx.config, { name: positionals[0], plan: str(o.plan), allowIps: list(o["allow-ip"]), contacts: list(o.contact) }, cliAudit(o)),
        );
        return { json: shape(account), text: `created ${describe(account)}` };
      }
      case "update": {
        const { options: o, positionals } = options(
          rest,
          { plan: "string", "allow-ip": "string", "clear-allow-ip": "boolean", contact: "string", rename: "string", budget: "string", "budget-period": "string", "clear-budget": "boolean", "on-behalf-of": "string" },
          usage,
        );
        if (positionals.length !== 1) throw new CliError("invalid_argument", `accounts update needs exactly one NAME or ID\n${usage}`);
        const allowIps = o["clear-allow-ip"] ? [] : list(o["allow-ip"]);
        let budget: AccountInput["budget"];
        if (o["clear-budget"]) budget = null;
        else if (str(o.budget) !== undefined) {
          const period = str(o["budget-period"]) ?? "month";
          if (period !== "day" && period !== "month") throw new CliError("invalid_argument", `--budget-period is day or month\n${usage}`);
          budget = { amount: str(o.budget)!, period };
        }
        const account = await withStore(ctx, (store) =>
          updateAccount(store, ctx.config, positionals[0], { plan: str(o.plan), allowIps, contacts: list(o.contact), name: str(o.rename), budget }, cliAudit(o)),
        );
        return { json: shape(account), text: `updated ${describe(account)}` };
      }
      case "show": {
        const { positionals } = options(rest, {}, usage);
        if (positionals.length !== 1) throw new CliError("invalid_argument", `accounts show needs exactly one NAME or ID\n${usage}`);
        const { account, status } = await withStore(ctx, async (store) => {
          const account = await findAccount(store, positionals[0]);
          return { account, status: await meterStatus(store, ctx.config, account) };
        });
        return { json: { ...account, limits: status }, text: [describe(account), ...describeMeterStatus(status)].join("\n") };
      }
      case "list": {
        const { positionals } = options(rest, {}, usage);
        if (positionals.length) throw new CliError("invalid_argument", `unexpected argument ${positionals[0]}\n${usage}`);
        const accounts = await withStore(ctx, (store) => listAccounts(store));
        const rows = [["ID", "NAME", "PLAN", "ALLOW-IPS", "CONTACTS"], ...accounts.map((a) => [a.id, a.name, a.plan, a.allowIps.join(",") || "-", a.contacts.join(",") || "-"])];
        return { json: accounts, text: accounts.length ? table(rows) : "no accounts" };
      }
      default:
        throw usageError(sub, usage);
    }
  },
};
