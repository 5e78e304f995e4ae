import type { AppConfig } from "../config/app-config.ts";

/** What every CLI command gets: the loaded config and output writers. */
export interface CliContext {
  config: AppConfig;
  json: boolean;
  /** Writes a line to stdout. */
  out(text: string): void;
  /** Writes a line to stderr (progress, warnings). */
  err(text: string): void;
  /** Whether stderr is a TTY (progress bars) or not (plain progress lines). */
  isTTY: boolean;
}

/** What a command returns: `json` is printed with --json, `text` otherwise. */
export interface CommandResult {
  json: unknown;
  text: string;
}

/** A command failure: exit 1, and with --json `{error: {code, message}}` on stdout. */
export class CliError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "CliError";
  }
}

/** A subcommand group such as `keys` or `accounts`: `args` are what follows its name, global flags removed. */
export interface Command {
  name: string;
  summary: string;
  /** `modelgate <command> --help`: its subcommands, options and an example. */
  usage: string;
  run(args: string[], ctx: CliContext): Promise<CommandResult>;
}
