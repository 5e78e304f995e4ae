import { readFileSync } from "node:fs";
import path from "node:path";
import { loadConfig, ConfigError } from "../config/load-config.ts";
import { builtInEngines } from "../engines/registry.ts";
import { takeGlobalFlags } from "./args.ts";
import { CliError, type CliContext, type Command } from "./command.ts";

/** Subcommands load lazily, so `modelgate keys list` never imports llama.cpp or onnxruntime. */
const commands: Record<string, () => Promise<Command>> = {
  serve: async () => (await import("./serve.ts")).serveCommand,
  keys: async () => (await import("./keys.ts")).keysCommand,
  accounts: async () => (await import("./accounts.ts")).accountsCommand,
  members: async () => (await import("./members.ts")).membersCommand,
  operators: async () => (await import("./members.ts")).operatorsCommand,
  usage: async () => (await import("./usage.ts")).usageCommand,
  audit: async () => (await import("./audit.ts")).auditCommand,
  migrate: async () => (await import("./migrate.ts")).migrateCommand,
  models: async () => (await import("./models.ts")).modelsCommand,
  pull: async () => (await import("./pull.ts")).pullCommand,
  engines: async () => (await import("./engines.ts")).enginesCommand,
};

const usage = `usage: modelgate <command> [options]

commands:
  serve [--host H] [--port P] [--pull]   start the HTTPS API
  accounts create|update|list ...        manage accounts
  keys create|list|rotate|revoke ...     manage API keys
  members invite|list --account A ...    invite an account's console members (a one-time link)
  operators invite|list ...              invite console operators (the first one, on a new server)
  usage [--account A]                    show recorded usage
  audit [--account A] [--action X]       show the audit log of account and key operations
  audit verify                           check the audit log's hash chain; exit 1 at the first break
  migrate                                run the database migrations (as database.migrationUrl's role)
  models list                            show configured models and their local state
  pull [<ref>] [--dtype D]               download models from the Hugging Face hub
  engines build llama-server             build llama.cpp's server into the data dir (llama models with parallel > 1 run on it)
  engines status                         whether llama-server is built
  help [<command>]                       this text, or a command's options and an example

global options:
  --config FILE     YAML or JSON config (default: MODELGATE_CONFIG, else built-in defaults)
  --data-dir DIR    data directory (wins over MODELGATE_DATA_DIR and the config's dataDir; default ./data)
  --json            machine-readable output
  --version         print the version
  --help            help (after a command: that command's)

example:
  modelgate serve --config modelgate.yaml`;

/** The package's version, from its package.json (one level above src/ and dist/). */
function version(): string {
  const file = path.join(import.meta.dirname, "../../package.json");
  return (JSON.parse(readFileSync(file, "utf8")) as { version: string }).version;
}

function errorCode(err: unknown): string {
  if (err instanceof CliError) return err.code;
  if (err instanceof ConfigError) return "invalid_config";
  return "error";
}

/** Runs the CLI and returns the exit code. */
export async function main(argv: string[]): Promise<number> {
  let json = argv.includes("--json");
  const out = (text: string) => process.stdout.write(`${text}\n`);
  const err = (text: string) => process.stderr.write(`${text}\n`);
  try {
    const flags = takeGlobalFlags(argv);
    json = flags.json;
    const [first, ...more] = flags.rest;
    if (flags.version) {
      out(json ? JSON.stringify({ version: version() }) : `modelgate ${version()}`);
      return 0;
    }
    // `modelgate help keys` is `modelgate keys --help`.
    const helpRequested = flags.help || first === "help";
    const [name, ...args] = first === "help" ? more : [first, ...more];
    if (!name) {
      out(usage);
      return helpRequested ? 0 : 2;
    }
    const load = Object.hasOwn(commands, name) ? commands[name] : undefined;
    if (!load) throw new CliError("unknown_command", `unknown command "${name}"\n\n${usage}`);
    if (helpRequested) {
      out((await load()).usage);
      return 0;
    }
    const config = loadConfig(flags.config ?? (process.env.MODELGATE_CONFIG || null), builtInEngines(), { dataDir: flags.dataDir ?? undefined });
    const ctx: CliContext = { config, json, out, err, isTTY: Boolean(process.stderr.isTTY) };
    const command = await load();
    const result = await command.run(args, ctx);
    if (json) out(JSON.stringify(result.json));
    else if (result.text) out(result.text);
    return 0;
  } catch (error) {
    const message = (error as Error).message;
    if (json) out(JSON.stringify({ error: { code: errorCode(error), message } }));
    else err(`modelgate: ${message}`);
    return 1;
  }
}
