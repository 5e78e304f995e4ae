import { existsSync } from "node:fs";
import type { AppConfig, ModelEntry } from "../../config/app-config.ts";
import { localPathForHubRef, parseHubRef } from "../../config/hub-ref.ts";
import { HubClient, hubOptionsFromEnv } from "./hub-client.ts";
import { progressReporter, type ProgressOutput } from "./progress.ts";
import { locateModelFiles } from "../../config/model-files.ts";
import { builtInEngines } from "../../engines/registry.ts";
import { pullHubRef, type PullResult } from "./pull-model.ts";

export interface ConfiguredPull {
  id: string;
  ref: string;
  result: PullResult | null;
  error: string | null;
}

/** Hub refs a model needs besides its own files, as its engine kind says. */
export function companionRefs(entry: ModelEntry): string[] {
  return builtInEngines().companionRefs(entry);
}

export interface PullConfiguredOptions {
  out: ProgressOutput;
  /** Pull these model ids only (default: every hub model that is missing). */
  only?: string[];
  client?: HubClient;
  signal?: AbortSignal;
}

/** Pulls every configured hub model whose files are missing, one after the other. Never throws for one model's failure. */
export async function pullConfiguredModels(config: AppConfig, options: PullConfiguredOptions): Promise<ConfiguredPull[]> {
  const client = options.client ?? new HubClient(hubOptionsFromEnv());
  const events = progressReporter(options.out);
  const results: ConfiguredPull[] = [];
  for (const entry of config.models) {
    if (!entry.hubRef) continue;
    if (options.only && !options.only.includes(entry.id)) continue;
    for (const companion of companionRefs(entry)) {
      if (existsSync(localPathForHubRef(config.dataDir, parseHubRef(companion)))) continue;
      try {
        await pullHubRef(companion, { dataDir: config.dataDir, client, events, log: (line) => options.out.line(line), signal: options.signal });
      } catch (err) {
        options.out.line(`could not pull ${companion} for ${entry.id} (${(err as Error).message}); long audio is cut into fixed windows instead of at silences`);
      }
    }
    if (locateModelFiles(entry)) continue;
    try {
      const result = await pullHubRef(entry.hubRef, {
        dataDir: config.dataDir,
        client,
        events,
        log: (line) => options.out.line(line),
        dtype: entry.dtype,
        signal: options.signal,
      });
      locateModelFiles(entry);
      results.push({ id: entry.id, ref: entry.hubRef, result, error: null });
    } catch (err) {
      results.push({ id: entry.id, ref: entry.hubRef, result: null, error: (err as Error).message });
    }
  }
  return results;
}

/**
 * `serve --pull` / `pull: auto`: fetches the missing hub models before the catalog loads, reporting progress as plain
 * lines. A model that cannot be fetched (offline, gated) is reported and stays unavailable; the service starts anyway.
 */
export async function pullMissingModels(config: AppConfig, report: (line: string) => void): Promise<void> {
  const results = await pullConfiguredModels(config, { out: { line: report } });
  for (const r of results) {
    if (r.error) report(`could not pull ${r.id} (${r.ref}): ${r.error}; it stays unavailable until \`modelgate pull ${r.ref}\` succeeds`);
    else report(`${r.id}: ready at ${r.result!.path}`);
  }
}
