import { isHubRef } from "../config/hub-ref.ts";
import { VerifyError } from "../catalog/pull/download-file.ts";
import { HubClient, HubError, hubOptionsFromEnv } from "../catalog/pull/hub-client.ts";
import { PlanError } from "../catalog/pull/plan-error.ts";
import { formatBytes, progressReporter, type ProgressOutput } from "../catalog/pull/progress.ts";
import { companionRefs, pullConfiguredModels } from "../catalog/pull/pull-missing.ts";
import { pullHubRef, type PullResult } from "../catalog/pull/pull-model.ts";
import { CliError, type CliContext, type Command, type CommandResult } from "./command.ts";

const usage = `usage: modelgate pull [<hf:org/repo[:file|:QUANT]> | <model id>]... [--dtype fp32|fp16|q8|q4|...]
  With no argument, pulls every configured hub model whose files are missing.
  HF_TOKEN authenticates (gated or private repos); HF_ENDPOINT points at another hub or a mirror.

options:
  --dtype D   the file variant of an ONNX layout to fetch (default: the model entry's dtype, else q8)

example:
  modelgate pull hf:HuggingFaceTB/SmolLM2-135M-Instruct-GGUF:Q4_K_M`;

function toCliError(err: unknown, what: string): CliError {
  if (err instanceof CliError) return err;
  if (err instanceof HubError) return new CliError(err.code, `pull ${what} failed: ${err.message}`);
  if (err instanceof VerifyError) return new CliError("verify_failed", `pull ${what} failed: ${err.message}`);
  if (err instanceof PlanError) return new CliError("not_pullable", `pull ${what} failed: ${err.message}`);
  if (err instanceof Error && /invalid hub ref/.test(err.message)) return new CliError("invalid_ref", err.message);
  return new CliError("pull_failed", `pull ${what} failed: ${(err as Error).message}`);
}

function progressOutput(ctx: CliContext): ProgressOutput {
  if (!ctx.isTTY) return { line: (text) => ctx.err(text) };
  return {
    line: (text) => (text ? process.stderr.write(`\r\x1b[K${text}\n`) : process.stderr.write("\n")),
    redraw: (text) => process.stderr.write(`\r\x1b[K${text}`),
  };
}

function describe(result: PullResult): string {
  const fetched = result.files.filter((f) => f.downloaded).length;
  const resumed = result.files.some((f) => f.resumedFrom > 0) ? ", resumed" : "";
  const verified = [...new Set(result.files.map((f) => f.verified))].join("/");
  const what = fetched === 0 ? "already present" : `${fetched} of ${result.files.length} files fetched (${formatBytes(result.downloadedBytes)}${resumed})`;
  return `${result.ref}${result.dtype ? ` [${result.dtype}]` : ""}: ${what}, ${formatBytes(result.totalBytes)} verified by ${verified} -> ${result.path}`;
}

function parseArgs(args: string[]): { refs: string[]; dtype: string | null } {
  const refs: string[] = [];
  let dtype: string | null = null;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === "--dtype") {
      dtype = args[++i] ?? null;
      if (!dtype) throw new CliError("invalid_argument", `--dtype needs a value\n${usage}`);
    } else if (arg.startsWith("--dtype=")) dtype = arg.slice("--dtype=".length);
    else if (arg === "--help" || arg === "-h") throw new CliError("usage", usage);
    else if (arg.startsWith("-")) throw new CliError("invalid_argument", `unknown option ${arg}\n${usage}`);
    else refs.push(arg);
  }
  return { refs, dtype };
}

export const pullCommand: Command = {
  name: "pull",
  summary: "Download models from the Hugging Face hub into <dataDir>/models",
  usage,
  async run(args: string[], ctx: CliContext): Promise<CommandResult> {
    const { refs, dtype } = parseArgs(args);
    const client = new HubClient(hubOptionsFromEnv());
    const out = progressOutput(ctx);

    if (refs.length === 0) {
      const results = await pullConfiguredModels(ctx.config, { out, client });
      const failed = results.filter((r) => r.error);
      if (failed.length > 0) {
        throw new CliError("pull_failed", failed.map((r) => `pull ${r.id} (${r.ref}) failed: ${r.error}`).join("\n"));
      }
      const pulled = results.map((r) => ({ id: r.id, ...r.result! }));
      const text = pulled.length === 0 ? "every configured hub model is present" : pulled.map((r) => `${r.id}: ${describe(r)}`).join("\n");
      return { json: { pulled }, text };
    }

    const pulled: (PullResult & { id: string | null })[] = [];
    for (const arg of refs) {
      // A configured model id pulls that model's source with its dtype.
      const entry = isHubRef(arg) ? undefined : ctx.config.models.find((m) => m.id === arg);
      if (!isHubRef(arg) && !entry) {
        throw new CliError("invalid_ref", `"${arg}" is neither a hub ref (hf:org/repo[:file|:QUANT]) nor a configured model id\n${usage}`);
      }
      if (entry && !entry.hubRef) throw new CliError("invalid_ref", `model ${entry.id} has a local source (${entry.source}); there is nothing to pull`);
      const ref = entry ? entry.hubRef! : arg;
      try {
        const result = await pullHubRef(ref, {
          dataDir: ctx.config.dataDir,
          client,
          events: progressReporter(out),
          log: (line) => out.line(line),
          dtype: dtype ?? entry?.dtype ?? ctx.config.models.find((m) => m.hubRef === ref)?.dtype ?? null,
        });
        const owner = entry ?? ctx.config.models.find((m) => m.hubRef === ref);
        pulled.push({ id: owner?.id ?? null, ...result });
        for (const companion of owner ? companionRefs(owner) : []) {
          try {
            await pullHubRef(companion, { dataDir: ctx.config.dataDir, client, events: progressReporter(out), log: (line) => out.line(line) });
          } catch (err) {
            out.line(`could not pull ${companion} (${(err as Error).message}); long audio is cut into fixed windows instead of at silences`);
          }
        }
      } catch (err) {
        throw toCliError(err, ref);
      }
    }
    return { json: { pulled }, text: pulled.map(describe).join("\n") };
  },
};
