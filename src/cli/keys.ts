import { CliError, type CliContext, type Command, type CommandResult } from "./command.ts";
import { createKey, listKeys, revokeKey, rotateKey, type CreatedKey } from "../keys/lifecycle.ts";
import { RedisRevocationBus } from "../keys/revocation-bus.ts";
import { cliAudit, list, options, str, table, usageError, withStore } from "./store-support.ts";

const usage = `usage:
  modelgate keys create --account NAME|ID [--name N] [--models p1,p2] [--endpoints chat,embeddings,transcriptions,rerank,models] [--deployment D] [--on-behalf-of EMAIL] [--json]
  modelgate keys list [--account NAME|ID] [--json]
  modelgate keys rotate ID [--on-behalf-of EMAIL] [--json]     a second key with the same account, scopes and deployment; the old one stays active
  modelgate keys revoke ID [--on-behalf-of EMAIL] [--json]     permanent

--on-behalf-of EMAIL: the operation is done at the request of this registered contact of the account (support);
it goes into the audit log, and an address the account has not registered is refused.

example:
  modelgate keys create --account acme --name ci --endpoints chat,embeddings`;

function created(k: CreatedKey, verb: string): CommandResult {
  return {
    json: { id: k.id, key: k.key, prefix: k.prefix, account: k.account },
    text: `${verb} key ${k.id} for account ${k.accountName} (${k.account})\n\n  ${k.key}\n\nThis is the only time the key is shown; store it now.`,
  };
}

function one(positionals: string[], what: string): string {
  if (positionals.length !== 1) throw new CliError("invalid_argument", `keys ${what} needs exactly one key ID\n${usage}`);
  return positionals[0];
}

export const keysCommand: Command = {
  name: "keys",
  summary: "Create, list, rotate and revoke API keys",
  usage,
  async run(args: string[], ctx: CliContext): Promise<CommandResult> {
    const [sub, ...rest] = args;
    switch (sub) {
      case "create": {
        const { options: o, positionals } = options(rest, { account: "string", name: "string", models: "string", endpoints: "string", deployment: "string", "on-behalf-of": "string" }, usage);
        if (positionals.length) throw new CliError("invalid_argument", `unexpected argument ${positionals[0]}\n${usage}`);
        const account = str(o.account);
        if (!account) throw new CliError("invalid_argument", `keys create needs --account NAME|ID\n${usage}`);
        const key = await withStore(ctx, (store) =>
          createKey(store, { account, name: str(o.name), models: list(o.models), endpoints: list(o.endpoints), deployment: str(o.deployment) }, cliAudit(o)),
        );
        return created(key, "created");
      }
      case "list": {
        const { options: o, positionals } = options(rest, { account: "string" }, usage);
        if (positionals.length) throw new CliError("invalid_argument", `unexpected argument ${positionals[0]}\n${usage}`);
        const keys = await withStore(ctx, (store) => listKeys(store, str(o.account)));
        const rows = [
          ["ID", "PREFIX", "ACCOUNT", "NAME", "MODELS", "ENDPOINTS", "DEPLOYMENT", "CREATED", "LAST-USED", "STATE"],
          ...keys.map((k) => [
            k.id,
            k.prefix,
            k.accountName,
            k.name ?? "-",
            k.models?.join(",") ?? "*",
            k.endpoints?.join(",") ?? "*",
            k.deployment ?? "-",
            k.createdAt,
            k.lastUsedAt ?? "-",
            k.revokedAt ? `revoked ${k.revokedAt}` : "active",
          ]),
        ];
        return { json: keys, text: keys.length ? table(rows) : "no keys" };
      }
      case "rotate": {
        const { options: o, positionals } = options(rest, { "on-behalf-of": "string" }, usage);
        const key = await withStore(ctx, (store) => rotateKey(store, one(positionals, "rotate"), cliAudit(o)));
        return created(key, "rotated: new");
      }
      case "revoke": {
        const { options: o, positionals } = options(rest, { "on-behalf-of": "string" }, usage);
        const result = await withStore(ctx, async (store) => {
          // With Redis, every running replica drops the key at once instead of within its cache time.
          const bus = ctx.config.redisUrl ? await RedisRevocationBus.connect(ctx.config.redisUrl).catch(() => null) : null;
          try {
            return await revokeKey(store, one(positionals, "revoke"), cliAudit(o), bus);
          } finally {
            await bus?.close();
          }
        });
        return { json: result, text: `revoked ${result.id} at ${result.revokedAt}` };
      }
      default:
        throw usageError(sub, usage);
    }
  },
};
