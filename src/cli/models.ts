import { localModelState } from "../catalog/local-state.ts";
import { formatBytes } from "../catalog/pull/progress.ts";
import { CliError, type CliContext, type Command, type CommandResult } from "./command.ts";

const usage = `usage: modelgate models list [--json]
  Shows each configured model: engine, local state (present/missing on disk), size on disk, capabilities, source.
  A running server reports loading/loaded states at GET /admin/v1/models.`;

function table(rows: string[][]): string {
  const widths = rows[0].map((_, col) => Math.max(...rows.map((r) => r[col].length)));
  return rows.map((r) => r.map((cell, col) => (col === r.length - 1 ? cell : cell.padEnd(widths[col]))).join("  ")).join("\n");
}

function list(ctx: CliContext): CommandResult {
  const models = ctx.config.models.map((entry) => localModelState(entry, ctx.config.dataDir));
  const rows = [
    ["ID", "ENGINE", "STATE", "SIZE", "CAPABILITIES", "SOURCE"],
    ...models.map((m) => [m.id, m.engine, m.state, m.sizeBytes === null ? "-" : formatBytes(m.sizeBytes), m.capabilities.join(","), m.source]),
  ];
  const missing = models.filter((m) => m.pullCommand);
  const hint = missing.length ? `\n\n${missing.length} missing: run \`modelgate pull\` to fetch them all, or ${missing[0].pullCommand}` : "";
  const origin = ctx.config.usingDefaultCatalog ? " (built-in default catalog)" : "";
  return {
    json: { dataDir: ctx.config.dataDir, defaultCatalog: ctx.config.usingDefaultCatalog, models },
    text: `models in ${ctx.config.dataDir}/models${origin}\n${table(rows)}${hint}`,
  };
}

export const modelsCommand: Command = {
  name: "models",
  summary: "List configured models with their local state and size",
  async run(args: string[], ctx: CliContext): Promise<CommandResult> {
    const [sub, ...rest] = args;
    if (sub === "list" || sub === undefined) {
      const unknown = rest.find((a) => a !== "--json");
      if (unknown) throw new CliError("invalid_argument", `unknown argument ${unknown}\n${usage}`);
      return list(ctx);
    }
    throw new CliError(sub === "--help" || sub === "-h" ? "usage" : "invalid_argument", sub === "--help" || sub === "-h" ? usage : `unknown subcommand "${sub}"\n${usage}`);
  },
};
