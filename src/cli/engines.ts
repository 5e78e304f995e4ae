import { availableParallelism } from "node:os";
import { BuildError, buildLlamaServer, builtLlamaServer, llamaCppSource, readBuildInfo } from "../engines/llama-server/llama-server-build.ts";
import { parseOptions } from "./args.ts";
import { CliError, type CliContext, type Command, type CommandResult } from "./command.ts";

const usage = `usage: modelgate engines build llama-server [--jobs N] [--force]
       modelgate engines status
  build llama-server   builds llama.cpp's server from the llama.cpp source node-llama-cpp ships (the same commit as
                       the in-process engine), CPU, tuned for this machine, into <dataDir>/engines/llama-server/.
                       Needs git, cmake, a C++ compiler and make; several minutes on 2 cores. Once it is there,
                       \`engine: llama\` models with parallel > 1 run on it (llama.server: auto; docs/engines.md).
                       A build of the same commit is kept (--force rebuilds).
  status               whether llama-server is built, and which commit

options:
  --jobs N    parallel compile jobs (default: the CPU count)
  --force     rebuild even when a build of the same commit is there

example:
  modelgate engines build llama-server --config modelgate.yaml`;

async function build(args: string[], ctx: CliContext): Promise<CommandResult> {
  const { options, positionals } = parseOptions(args, { jobs: "string", force: "boolean" });
  if (positionals[0] !== "llama-server" || positionals.length > 1) {
    throw new CliError("invalid_argument", `${positionals[0] ? `cannot build "${positionals.join(" ")}": ` : ""}the engine to build is llama-server\n${usage}`);
  }
  const jobs = options.jobs === undefined ? availableParallelism() : Number(options.jobs);
  if (!Number.isInteger(jobs) || jobs < 1) throw new CliError("invalid_argument", "--jobs needs a whole number of at least 1");
  try {
    const result = await buildLlamaServer({
      dataDir: ctx.config.dataDir,
      jobs,
      force: options.force === true,
      progress: (line) => ctx.err(`llama-server: ${line}`),
    });
    const what = result.built ? `built llama-server (llama.cpp ${result.commit.slice(0, 12)}) in ${result.seconds} s` : `llama-server is already built (llama.cpp ${result.commit.slice(0, 12)}); --force rebuilds it`;
    return {
      json: { binary: result.binary, commit: result.commit, built: result.built, seconds: result.seconds },
      text: `${what}: ${result.binary}\nengine: llama models with parallel > 1 now run on it (llama.server: auto)`,
    };
  } catch (err) {
    if (err instanceof BuildError) throw new CliError(err.code, err.message);
    throw err;
  }
}

function status(ctx: CliContext): CommandResult {
  const binary = builtLlamaServer(ctx.config.dataDir);
  const info = readBuildInfo(ctx.config.dataDir);
  let shipped: string | null = null;
  try {
    shipped = llamaCppSource().commit;
  } catch {
    shipped = null;
  }
  const stale = binary !== null && info !== null && shipped !== null && info.commit !== shipped;
  const configured = ctx.config.llama.serverBinary;
  const json = { llamaServer: { binary, commit: info?.commit ?? null, nodeLlamaCppCommit: shipped, stale, serverBinary: configured, mode: ctx.config.llama.server } };
  const line = binary
    ? `llama-server: built, llama.cpp ${info?.commit.slice(0, 12)}${stale ? ` (node-llama-cpp now ships ${shipped?.slice(0, 12)}: run modelgate engines build llama-server)` : ""}: ${binary}`
    : "llama-server: not built (modelgate engines build llama-server)";
  const used = configured ? `\nllama.serverBinary: ${configured}` : "";
  return { json, text: `${line}${used}\nllama.server: ${ctx.config.llama.server}` };
}

export const enginesCommand: Command = {
  name: "engines",
  summary: "build and inspect engines Modelgate runs as processes (llama-server)",
  usage,
  async run(args: string[], ctx: CliContext): Promise<CommandResult> {
    const [sub, ...rest] = args;
    if (sub === "build") return build(rest, ctx);
    if (sub === "status" && rest.length === 0) return status(ctx);
    throw new CliError("invalid_argument", `${sub ? `unknown subcommand "${[sub, ...rest].join(" ")}"` : "missing subcommand"}\n${usage}`);
  },
};
