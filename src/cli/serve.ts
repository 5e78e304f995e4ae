import { existsSync } from "node:fs";
import path from "node:path";
import type { Store } from "../store/store.ts";
import { buildServer, type Server } from "../server.ts";
import type { RunnerStats } from "../scheduler/runner-types.ts";
import { loadConfig } from "../config/load-config.ts";
import { reloadPlans } from "../config/reload-plans.ts";
import { parseOptions } from "./args.ts";
import type { CliContext, Command, CommandResult } from "./command.ts";
import type { AppConfig } from "../config/app-config.ts";
import { pullCommandFor } from "../config/model-files.ts";
import { builtInEngines } from "../engines/registry.ts";
import { LogOutput, logFormatFor } from "./log-output.ts";
import { trimNativeMemoryAfterGc } from "../metrics/after-gc.ts";

/** `modelgate` when it is on the PATH (a global install), else `npx modelgate` (run from the project folder). */
function cliName(env: NodeJS.ProcessEnv = process.env): string {
  const onPath = (env.PATH ?? "").split(path.delimiter).some((dir) => dir && existsSync(path.join(dir, "modelgate")));
  return onPath ? "modelgate" : "npx modelgate";
}

/** On a store with no accounts yet: the two commands that create the first account and key. */
async function firstStartHints(store: Store, config: AppConfig): Promise<string[]> {
  const hasAccounts = await store.accounts.any().catch(() => true);
  if (hasAccounts) return [];
  // The same config and data dir as this server, so the commands write to its store.
  const where = `${config.configFile ? ` --config ${config.configFile}` : ""} --data-dir ${config.dataDir}`;
  const cli = `${cliName()}${where}`;
  return [
    "no accounts yet: create the first account and an API key (in another terminal, from this folder):",
    `  ${cli} accounts create my-team`,
    `  ${cli} keys create --account my-team`,
  ];
}

function urlHost(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
}

function describeModels(config: AppConfig, stats: { id: string; state: string; error: string | null }[]): string[] {
  return stats.map((s) => {
    const entry = config.models.find((m) => m.id === s.id)!;
    if (s.state === "missing") {
      const pull = pullCommandFor(entry);
      return pull ? `model ${s.id}: missing (${entry.path}); run: ${pull}` : `model ${s.id}: missing: no file at ${entry.path} (fix its source in the config)`;
    }
    if (s.state === "failed") return `model ${s.id}: failed to load: ${s.error}`;
    const placed = entry.configuredEngine && entry.configuredEngine !== entry.engine ? ` (engine ${entry.configuredEngine}, served by ${entry.engine})` : "";
    return `model ${s.id}: ${s.state}${placed}`;
  });
}

const usage = `usage: modelgate serve [--host H] [--port P] [--pull] [--config FILE] [--data-dir DIR] [--json]
  Starts the HTTPS API and runs until SIGTERM or SIGINT; SIGHUP reloads the models, routes and plans from the config file.

options:
  --host H   address to bind (default: server.host, 127.0.0.1)
  --port P   port (default: server.port, 8443; 0 picks a free one)
  --pull     pull missing hub models before loading them

example:
  modelgate serve --config modelgate.yaml --host 0.0.0.0`;

/** How long the log may take to drain once the server has closed; past it, what is left is dropped. */
const logDrainMs = 1000;
/** Shutdown ends the process within shutdownTimeout + this, whatever else hangs (a native dispose, a stuck log). */
const shutdownGraceMs = 4000;

/** The start-up facts for machines, as fields; marked `startup`, so a terminal shows the summary instead. */
function logStartup(server: Server, url: string, stats: RunnerStats[], config: AppConfig, accounts: boolean): void {
  const { tls } = server;
  server.app.log.info(
    { startup: true, url, cert: { path: tls.certPath, sha256: tls.fingerprint, generated: tls.generated, replacedCa: tls.replacedCa }, accounts },
    "started",
  );
  for (const s of stats) {
    if (s.state !== "missing" && s.state !== "failed") continue;
    const entry = config.models.find((m) => m.id === s.id)!;
    server.app.log.warn({ startup: true, model: s.id, state: s.state, path: entry.path, pull: pullCommandFor(entry), error: s.error ?? undefined }, `model ${s.state}`);
  }
}

/** `modelgate serve`: binds HTTPS, loads eager models, prints `listening https://H:P`, runs until SIGTERM. */
export const serveCommand: Command = {
  name: "serve",
  summary: "start the HTTPS API",
  usage,
  async run(args: string[], cli: CliContext): Promise<CommandResult> {
    const { options } = parseOptions(args, { host: "string", port: "string", pull: "boolean" });
    const overrides = {
      dataDir: cli.config.dataDir,
      host: options.host as string | undefined,
      port: options.port === undefined ? undefined : Number(options.port),
    };
    const config = { ...cli.config, server: { ...cli.config.server, host: overrides.host ?? cli.config.server.host, port: overrides.port ?? cli.config.server.port } };
    // Logs go to stderr so stdout carries only the lines a person or script waits for. A reader that has gone
    // must not stop anything: an EPIPE on either is ignored (the log turns itself off, see LogOutput).
    process.stdout.on("error", () => {});
    process.stderr.on("error", () => {});
    const format = logFormatFor(config.logFormat, cli.isTTY);
    const output = new LogOutput(format, { colors: format === "pretty" && cli.isTTY && !process.env.NO_COLOR });
    // On a terminal nobody parses pid and hostname; leaving them out keeps the readable line short.
    const server = await buildServer(config, { logger: { stream: output, ...(format === "pretty" ? { base: null } : {}) } });
    if (config.server.trimNativeMemory) {
      const trim = await trimNativeMemoryAfterGc();
      if (!trim.enabled) server.app.log.debug({ reason: trim.reason }, "native memory is not trimmed after GC");
    }
    const log = (text: string) => (cli.json ? undefined : cli.out(text));

    const { tls } = server;
    if (tls.replacedCa) log(`replaced the generated certificate (sha256 ${tls.replacedCa}): it was a CA; the new one is a leaf, trust it instead`);
    if (tls.generated) log(`generated a self-signed certificate: ${tls.certPath}`);
    log(`tls certificate ${tls.certPath} sha256 ${tls.fingerprint}`);
    log(`trust it with: NODE_EXTRA_CA_CERTS=${tls.certPath}`);
    const hints = await firstStartHints(server.app.keyStore, config);
    for (const line of hints) log(line);
    const port = await server.listen();
    if (options.pull || config.pull === "auto") {
      const { pullMissingModels } = await import("../catalog/pull/pull-missing.ts");
      await pullMissingModels(config, (line) => cli.err(line));
      for (const runner of server.ctx.catalog.list()) runner.refresh();
    }
    try {
      await server.ctx.catalog.loadEager();
    } catch (err) {
      // An embeddings route whose targets give vectors of different lengths: refuse to start (issue 45).
      await server.close();
      throw err;
    }
    const stats = server.ctx.catalog.stats();
    for (const line of describeModels(config, stats)) log(line);
    const url = `https://${urlHost(config.server.host)}:${port}`;
    logStartup(server, url, stats, config, hints.length === 0);
    // The signal handlers are in place before `listening` is printed: whoever waits for that line may stop us at once.
    const stopped = new Promise<void>((resolve) => {
      let stopping = false;
      const exitNow = (why: string) => {
        output.abandon(`modelgate: ${why}; exiting\n`);
        process.exit(1);
      };
      const stop = (signal: string) => {
        if (stopping) exitNow(`second ${signal} during shutdown`);
        stopping = true;
        server.app.log.info({ signal }, "shutting down");
        // Nothing may hold the exit past this: not a connection, a native dispose, or a log nobody reads.
        setTimeout(() => exitNow(`shutdown did not finish within ${config.server.shutdownTimeoutMs + shutdownGraceMs} ms`), config.server.shutdownTimeoutMs + shutdownGraceMs).unref();
        void server.close().then(resolve, (err: unknown) => {
          server.app.log.error({ err }, "shutdown failed");
          resolve();
        });
      };
      process.on("SIGTERM", () => stop("SIGTERM"));
      process.on("SIGINT", () => stop("SIGINT"));
      process.on("SIGHUP", () => {
        if (!config.configFile) return;
        try {
          const next = loadConfig(config.configFile, builtInEngines(), overrides);
          void server.ctx.catalog.reload(next.models, next.routes);
          reloadPlans(server.ctx.config, next, server.app.log);
          server.app.log.info("configuration reloaded");
        } catch (err) {
          server.app.log.error({ err }, "configuration reload failed; keeping the running configuration");
        }
      });
    });
    if (cli.json) cli.out(JSON.stringify({ listening: url, cert: tls.certPath, fingerprint: tls.fingerprint, models: stats }));
    else cli.out(`listening ${url}`);
    await stopped;
    await output.finish(logDrainMs);
    return { json: { stopped: true }, text: "" };
  },
};
