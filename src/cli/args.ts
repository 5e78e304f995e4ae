import { parseArgs } from "node:util";

/** Global flags every command takes; they may appear anywhere on the command line. */
export interface GlobalFlags {
  config: string | null;
  dataDir: string | null;
  json: boolean;
  help: boolean;
  version: boolean;
  /** Everything else, in order: the command, its subcommand, its own options and arguments. */
  rest: string[];
}

const globalOptions = {
  config: { type: "string" },
  "data-dir": { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
  version: { type: "boolean", short: "v" },
} as const;

/** Takes the global flags out of the command line (node:util parseArgs, non-strict), keeping the rest in order. */
export function takeGlobalFlags(argv: string[]): GlobalFlags {
  const { values, tokens } = parseArgs({ args: argv, options: globalOptions, strict: false, allowPositionals: true, tokens: true });
  const rest: string[] = [];
  for (const token of tokens) {
    if (token.kind === "positional") rest.push(token.value);
    else if (token.kind === "option-terminator") rest.push("--");
    else if (!Object.hasOwn(globalOptions, token.name)) rest.push(token.inlineValue ? `${token.rawName}=${token.value}` : token.rawName);
  }
  for (const name of ["config", "data-dir"] as const) {
    if (values[name] === true) throw new Error(`--${name} needs a value`);
  }
  return {
    config: typeof values.config === "string" ? values.config : null,
    dataDir: typeof values["data-dir"] === "string" ? values["data-dir"] : null,
    json: values.json === true,
    help: values.help === true,
    version: values.version === true,
    rest,
  };
}

/** A subcommand's `--name value` / `--name=value` options and positional arguments (node:util parseArgs, strict). */
export function parseOptions(args: string[], known: Record<string, "string" | "boolean">): { options: Record<string, string | boolean>; positionals: string[] } {
  const options = Object.fromEntries(Object.entries(known).map(([name, type]) => [name, { type }])) as Record<string, { type: "string" | "boolean" }>;
  try {
    const { values, positionals } = parseArgs({ args, options, strict: true, allowPositionals: true });
    return { options: values as Record<string, string | boolean>, positionals };
  } catch (err) {
    const code = (err as { code?: string }).code;
    const option = /'(-{1,2}[^' ]+)/.exec((err as Error).message)?.[1];
    if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") throw new Error(`unknown option ${option ?? ""}`.trim());
    if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE") throw new Error(`${option ?? "an option"} needs a value`);
    throw err;
  }
}
