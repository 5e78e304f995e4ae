import { localModelState } from "../catalog/local-state.ts";
import { formatBytes } from "../catalog/pull/progress.ts";
import { CliError, type CliContext, type Command, type CommandResult } from "./command.ts";
import { configuredOrigin, fetchServerModels, type ServerModelState } from "./server-models.ts";

const usage = `usage: modelgate models list [--server URL] [--json]
  Shows each configured model: engine, state, size on disk, capabilities, source; for an upstream model, each
  upstream's state (healthy, ejected, probing), requests in flight, failures in the last minute and latency.
  State is present/missing on disk; when a server runs (the configured address, or --server) and the config has
  an adminToken, it is the server's: loaded, loading, present (not loaded), missing or failed.

options:
  --server URL   ask this server instead of the configured address

example:
  modelgate models list --config modelgate.yaml`;

/** The server's runner state in the words of `models list`. */
function serverState(state: string): string {
  return state === "ready" ? "loaded" : state === "unloaded" ? "present" : state;
}

function table(rows: string[][]): string {
  const widths = rows[0].map((_, col) => Math.max(...rows.map((r) => r[col].length)));
  return rows.map((r) => r.map((cell, col) => (col === r.length - 1 ? cell : cell.padEnd(widths[col]))).join("  ")).join("\n");
}

async function list(ctx: CliContext, server: string | null): Promise<CommandResult> {
  const origin = server ?? configuredOrigin(ctx.config);
  let running: ServerModelState[] | null;
  try {
    running = await fetchServerModels(ctx.config, origin);
  } catch (err) {
    throw new CliError("server_error", `cannot read model states from ${origin}: ${(err as Error).message}`);
  }
  if (server && !running) {
    throw new CliError("server_unreachable", ctx.config.adminToken ? `no server answers at ${server}` : "asking a server needs adminToken in the config");
  }
  const models = ctx.config.models.map((entry) => {
    const local = localModelState(entry, ctx.config.dataDir);
    const live = running?.find((r) => r.id === entry.id);
    return live
      ? { ...local, state: serverState(live.state), active: live.active, queueDepth: live.queueDepth, error: live.error, ...(live.upstreams ? { upstreams: live.upstreams } : {}) }
      : local;
  });
  // An upstream pool's members go on rows of their own under the model: state, in flight, failures, latency.
  const upstreamRows = (m: (typeof models)[number]) =>
    ("upstreams" in m ? (m.upstreams ?? []) : []).map((u) => [
      `  ${u.url}`,
      "",
      u.state,
      "",
      `${u.inFlight}/${u.maxInFlight} in flight, ${u.recentFailures} failed/min${u.latencyMs === null ? "" : `, ${u.latencyMs} ms`}`,
      "",
    ]);
  const rows = [
    ["ID", "ENGINE", "STATE", "SIZE", "CAPABILITIES", "SOURCE"],
    ...models.flatMap((m) => [[m.id, m.engine, m.state, m.sizeBytes === null ? "-" : formatBytes(m.sizeBytes), m.capabilities.join(","), m.source ?? "-"], ...upstreamRows(m)]),
  ];
  const missing = models.filter((m) => m.pullCommand);
  const hint = missing.length ? `\n\n${missing.length} missing: run \`modelgate pull\` to fetch them all, or ${missing[0].pullCommand}` : "";
  const catalogNote = ctx.config.usingDefaultCatalog ? " (built-in default catalog)" : "";
  return {
    json: { dataDir: ctx.config.dataDir, defaultCatalog: ctx.config.usingDefaultCatalog, server: running ? origin : null, models },
    text: `models in ${ctx.config.dataDir}/models${catalogNote}${running ? `, states from ${origin}` : ""}\n${table(rows)}${hint}`,
  };
}

export const modelsCommand: Command = {
  name: "models",
  summary: "List configured models with their local state and size",
  usage,
  async run(args: string[], ctx: CliContext): Promise<CommandResult> {
    const [sub, ...rest] = args;
    if (sub === "list" || sub === undefined) {
      let server: string | null = null;
      for (let i = 0; i < rest.length; i++) {
        if (rest[i] === "--server" && rest[i + 1]) server = rest[++i].replace(/\/+$/, "");
        else if (rest[i].startsWith("--server=")) server = rest[i].slice("--server=".length).replace(/\/+$/, "");
        else if (rest[i] !== "--json") throw new CliError("invalid_argument", `unknown argument ${rest[i]}\n${usage}`);
      }
      return list(ctx, server);
    }
    throw new CliError(sub === "--help" || sub === "-h" ? "usage" : "invalid_argument", sub === "--help" || sub === "-h" ? usage : `unknown subcommand "${sub}"\n${usage}`);
  },
};
