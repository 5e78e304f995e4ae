import pino from "pino";
import type { FastifyBaseLogger } from "fastify";
import { CliError, type CliContext, type Command, type CommandResult } from "./command.ts";
import { options } from "./store-support.ts";
import { migrateDatabase } from "../store/migrate-database.ts";

const usage = `usage: modelgate migrate [--config FILE] [--json]
  Brings the database schema up to date, then (PostgreSQL with two roles) gives the serving role its privileges.
  With database.migrationUrl (DATABASE_MIGRATION_URL) set, the migrations run as that role, the schema's owner, and
  the role of database.url (DATABASE_URL) gets only what serving needs: INSERT and SELECT on the audit log. Servers
  configured with a migrationUrl never migrate themselves: they refuse to start while a migration is pending.
  Without a migrationUrl, serve migrates at start as before and this command is optional. Safe to run again.

example:
  modelgate migrate --config modelgate.yaml
  (with database.url and database.migrationUrl in the file, or DATABASE_URL and DATABASE_MIGRATION_URL set)`;

export const migrateCommand: Command = {
  name: "migrate",
  summary: "Run the database migrations as the owner role and grant the serving role",
  usage,
  async run(args: string[], ctx: CliContext): Promise<CommandResult> {
    if (args[0] === "--help" || args[0] === "-h") throw new CliError("usage", usage);
    const { positionals } = options(args, {}, usage);
    if (positionals.length) throw new CliError("invalid_argument", `unexpected argument ${positionals[0]}\n${usage}`);
    const log = pino({ level: "silent" }) as unknown as FastifyBaseLogger;
    let report;
    try {
      report = await migrateDatabase(ctx.config, log);
    } catch (err) {
      throw new CliError("migration_failed", `migration failed: ${(err as Error).message}`);
    }
    for (const warning of report.warnings) ctx.err(`warning: ${warning}`);
    const lines = [report.applied.length ? `applied ${report.applied.join(", ")}` : "the schema is up to date"];
    if (report.owner && report.servingRole && report.owner !== report.servingRole) {
      lines.push(`granted the serving role "${report.servingRole}" its privileges (owner: "${report.owner}")`);
    }
    return { json: report, text: lines.join("\n") };
  },
};
