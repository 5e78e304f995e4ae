import { CliError, type CliContext, type Command, type CommandResult } from "./command.ts";
import { findAccount } from "../keys/lifecycle.ts";
import { inviteUser, type CreatedInvite } from "../auth/console-users.ts";
import { cliAudit, options, str, table, usageError, withStore } from "./store-support.ts";

const usage = `usage:
  modelgate members invite --account NAME|ID --email EMAIL --role owner|developer|viewer [--json]
  modelgate members list --account NAME|ID [--json]
  modelgate operators invite --email EMAIL --role operator-admin|operator-viewer [--json]
  modelgate operators list [--json]

An invite is a one-time link, valid 72 hours, printed once (the store keeps only its hash): send it to the person,
who opens it, sets a password and is signed in. With console.publicUrl set the full link is printed; otherwise the
path to append to the console's address. Inviting the first operator this way (or with the admin token on
POST /admin/v1/operators/invites) is how a new server gets its console users.

example:
  modelgate members invite --account acme --email dev@acme.example --role developer`;

function linkText(link: CreatedInvite, publicUrl: string | null): string {
  const where = publicUrl ? `${publicUrl}${link.path}` : `https://<console host>${link.path}`;
  return `invited ${link.email} as ${link.role} (valid until ${link.expiresAt}); the link, shown once:\n${where}`;
}

function makeCommand(kind: "members" | "operators"): Command {
  return {
    name: kind,
    summary: kind === "members" ? "Invite and list an account's console members" : "Invite and list console operators",
    usage,
    async run(args: string[], ctx: CliContext): Promise<CommandResult> {
      const [sub, ...rest] = args;
      const publicUrl = ctx.config.console.publicUrl;
      switch (sub) {
        case "invite": {
          const { options: o, positionals } = options(rest, { account: "string", email: "string", role: "string" }, usage);
          if (positionals.length || !o.email || !o.role || (kind === "members" && !o.account)) throw new CliError("invalid_argument", `${kind} invite needs ${kind === "members" ? "--account, " : ""}--email and --role\n${usage}`);
          const link = await withStore(ctx, async (store) => {
            const accountId = kind === "members" ? (await findAccount(store, str(o.account)!)).id : null;
            return inviteUser(store, { email: str(o.email)!, role: str(o.role)!, accountId }, cliAudit({}));
          });
          return { json: { ...link, url: publicUrl ? `${publicUrl}${link.path}` : null }, text: linkText(link, publicUrl) };
        }
        case "list": {
          const { options: o, positionals } = options(rest, { account: "string" }, usage);
          if (positionals.length || (kind === "members" && !o.account)) throw new CliError("invalid_argument", `${kind} list needs ${kind === "members" ? "--account" : "no argument"}\n${usage}`);
          const users = await withStore(ctx, async (store) => {
            const accountId = kind === "members" ? (await findAccount(store, str(o.account)!)).id : null;
            return (await store.users.list(accountId)).filter((u) => !u.disabledAt);
          });
          const rows = [["ID", "EMAIL", "ROLE", "TOTP", "CREATED"], ...users.map((u) => [u.id, u.email, u.role, u.totpEnabled ? "on" : "off", u.createdAt])];
          return { json: users, text: users.length ? table(rows) : `no ${kind}` };
        }
        default:
          throw usageError(sub, usage);
      }
    },
  };
}

export const membersCommand = makeCommand("members");
export const operatorsCommand = makeCommand("operators");
