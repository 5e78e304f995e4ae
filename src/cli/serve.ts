import { existsSync } from "node:fs";
import path from "node:path";
import pino from "pino";
import type { Store } from "../store/store.ts";
import { buildServer } from "../server.ts";
import { loadConfig } from "../config/load-config.ts";
import { parseOptions } from "./args.ts";
import type { CliContext, Command, CommandResult } from "./command.ts";
import type { AppConfig } from "../config/app-config.ts";
import { pullCommandFor } from "../catalog/model-files.ts";
import { builtInEngines } from "../engines/registry.ts";

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
    return `model ${s.id}: ${s.state}`;
  });
}

const usage = `usage: modelgate serve [--host H] [--port P] [--pull] [--config FILE] [--data-dir DIR] [--json]
  Starts the HTTPS API and runs until SIGTERM or SIGINT; SIGHUP reloads the models from the config file.

options:
  --host H   address to bind (default: server.host, 127.0.0.1)
  --port P   port (default: server.port, 8443; 0 picks a free one)
  --pull     pull missing hub models before loading them

example:
  modelgate serve --config modelgate.yaml --host 0.0.0.0`;

/** The longest a log line waits in the log buffer. */
const logFlushMs = 250;

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
    // Logs go to stderr so stdout carries only the lines a person or script waits for. They are written in blocks
    // of at least 4 KB (a write per access-log line cost about a tenth of the gateway's CPU under load), and at the
    // latest every logFlushMs, so a quiet server's lines are never held back longer; flushed at exit.
    const destination = pino.destination({ dest: 2, sync: false, minLength: 4096 });
    const flushTimer = setInterval(() => destination.flush(), logFlushMs);
    flushTimer.unref();
    process.once("exit", () => {
      try {
        destination.flushSync();
      } catch {
        // nothing buffered, or stderr already gone
      }
    });
    const server = await buildServer(config, { logger: { stream: destination } });
    const log = (text: string) => (cli.json ? undefined : cli.out(text));

    if (server.tls.generated) log(`generated a self-signed certificate: ${server.tls.certPath}`);
    log(`tls certificate ${server.tls.certPath} sha256 ${server.tls.fingerprint}`);
    log(`trust it with: NODE_EXTRA_CA_CERTS=${server.tls.certPath}`);
    for (const line of await firstStartHints(server.app.keyStore, config)) log(line);
    const port = await server.listen();
    if (options.pull || config.pull === "auto") {
      const { pullMissingModels } = await import("../catalog/pull/pull-missing.ts");
      await pullMissingModels(config, (line) => cli.err(line));
      for (const runner of server.ctx.catalog.list()) runner.refresh();
    }
    await server.ctx.catalog.loadEager();
    const stats = server.ctx.catalog.stats();
    for (const line of describeModels(config, stats)) log(line);
    const url = `https://${urlHost(config.server.host)}:${port}`;
    if (cli.json) cli.out(JSON.stringify({ listening: url, cert: server.tls.certPath, fingerprint: server.tls.fingerprint, models: stats }));
    else cli.out(`listening ${url}`);

    await new Promise<void>((resolve) => {
      const stop = (signal: string) => {
        server.app.log.info({ signal }, "shutting down");
        void server.close().then(resolve);
      };
      process.once("SIGTERM", () => stop("SIGTERM"));
      process.once("SIGINT", () => stop("SIGINT"));
      process.on("SIGHUP", () => {
        if (!config.configFile) return;
        try {
          const next = loadConfig(config.configFile, builtInEngines(), overrides);
          void server.ctx.catalog.reload(next.models);
          server.app.log.info("configuration reloaded");
        } catch (err) {
          server.app.log.error({ err }, "configuration reload failed; keeping the running configuration");
        }
      });
    });
    return { json: { stopped: true }, text: "" };
  },
};
