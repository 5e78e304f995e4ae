import { CliError, type CliContext, type Command, type CommandResult } from "./command.ts";
import { findAccount } from "../keys/lifecycle.ts";
import { options, str, table, withStore } from "./store-support.ts";

const usage = `usage: modelgate audit [--account NAME|ID] [--action ACTION] [--limit N] [--json]
       modelgate audit verify [--anchor SEQ:HASH] [--json]
  The audit log, newest first: every account and key operation, from the console, the CLI and the admin API, with
  its actor, the contact it was done on behalf of, the account, the key id (never a key value) and the address.

  verify   walks the log's hash chain from its first entry (each entry carries the SHA-256 of the one before it and
           of its own fields) and exits 1 at the first break: an entry edited, removed or inserted out of turn.
           It prints the head (seq and hash); kept somewhere else, it is an --anchor for a later verify, which then
           also finds a chain rewritten from before it. Needs only read access (no key secret).

example:
  modelgate audit --account acme --action key.revoke
  modelgate audit verify --anchor 1042:9f2c…`;

export const auditCommand: Command = {
  name: "audit",
  summary: "Show the audit log of account and key operations, or verify its hash chain",
  usage,
  async run(args: string[], ctx: CliContext): Promise<CommandResult> {
    if (args[0] === "--help" || args[0] === "-h") throw new CliError("usage", usage);
    if (args[0] === "verify") return verify(args.slice(1), ctx);
    const { options: o, positionals } = options(args, { account: "string", action: "string", limit: "string" }, usage);
    if (positionals.length) throw new CliError("invalid_argument", `unexpected argument ${positionals[0]}\n${usage}`);
    const limit = o.limit === undefined ? 100 : Number(o.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new CliError("invalid_argument", `--limit must be an integer from 1 to 10000\n${usage}`);
    const entries = await withStore(
      ctx,
      async (store) => {
        const account = str(o.account);
        const accountId = account ? (await findAccount(store, account)).id : undefined;
        return store.audit.list({ account: accountId, action: str(o.action), limit });
      },
      { keySecret: false },
    );
    const text = entries.length
      ? table([
          ["TIME", "ACTOR", "ON-BEHALF-OF", "ACTION", "ACCOUNT", "KEY", "SOURCE"],
          ...entries.map((e) => [e.at, e.actor, e.onBehalfOf ?? "-", e.action, e.accountId ?? "-", e.keyId ?? "-", e.source ?? "-"]),
        ])
      : "no audit entries";
    return { json: entries, text };
  },
};

async function verify(args: string[], ctx: CliContext): Promise<CommandResult> {
  const { options: o, positionals } = options(args, { anchor: "string" }, usage);
  if (positionals.length) throw new CliError("invalid_argument", `unexpected argument ${positionals[0]}\n${usage}`);
  let anchor: { seq: number; hash: string } | null = null;
  if (o.anchor !== undefined) {
    const m = /^(\d+):([0-9a-f]{64})$/.exec(String(o.anchor));
    if (!m) throw new CliError("invalid_argument", `--anchor takes SEQ:HASH, as verify printed the head\n${usage}`);
    anchor = { seq: Number(m[1]), hash: m[2] };
  }
  const { report, anchored } = await withStore(
    ctx,
    async (store) => ({ report: await store.audit.verify(), anchored: anchor ? await store.audit.hashAt(anchor.seq) : null }),
    { keySecret: false },
  );
  if (report.firstBreak) {
    const b = report.firstBreak;
    throw new CliError("audit_chain_broken", `the audit chain breaks at entry ${b.seq ?? "?"} (${b.id}, ${b.at}): ${b.reason}; the ${report.entries} entries before it verify`);
  }
  if (anchor && anchored !== anchor.hash) {
    const what = anchored === null ? `it has no entry ${anchor.seq}: entries were removed` : `entry ${anchor.seq} hashes to ${anchored.slice(0, 12)}… now: the chain was rewritten`;
    throw new CliError("audit_chain_broken", `the audit chain does not hold the anchor ${anchor.seq}:${anchor.hash.slice(0, 12)}…; ${what}`);
  }
  const head = report.head ? `${report.head.seq}:${report.head.hash}` : "none (empty log)";
  return { json: { ok: true, entries: report.entries, head: report.head }, text: `the audit chain verifies: ${report.entries} entries, head ${head}` };
}
