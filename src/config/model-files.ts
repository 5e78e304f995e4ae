import { existsSync } from "node:fs";
import path from "node:path";
import type { ModelEntry } from "./app-config.ts";
import { findQuantFile, parseHubRef } from "./hub-ref.ts";

/**
 * Whether a model's files are on disk. A hub quant ref's exact file name is only known once the GGUF is there
 * (pulled while the server runs, say), so a missing one is looked for again in its repo folder and `entry.path`
 * updated when found. Engines without local files (path null) always count as present.
 */
export function locateModelFiles(entry: ModelEntry): boolean {
  if (entry.path === null || existsSync(entry.path)) return true;
  const quant = entry.hubRef ? parseHubRef(entry.hubRef).quant : null;
  if (!quant) return false;
  const dir = path.dirname(entry.path);
  const found = findQuantFile(dir, quant);
  if (!found) return false;
  entry.path = path.join(dir, found);
  return true;
}

/**
 * The sentence every surface (404s, logs, the admin API) uses for a model whose files are missing: a hub model is
 * pulled; a local file can only be put back, so `modelgate pull <path>` is never suggested for it.
 */
export function missingFilesMessage(entry: ModelEntry): string {
  if (entry.hubRef) return `The model '${entry.id}' is configured but its files are missing (${entry.path}). Run \`modelgate pull ${entry.hubRef}\`.`;
  return `The model '${entry.id}' is configured but its file is missing: looked for ${entry.path}. Fix its \`source\` in the config or put the file there.`;
}

/** The pull command for a missing hub model, or null when pulling cannot help (a local path). */
export function pullCommandFor(entry: ModelEntry): string | null {
  return entry.hubRef ? `modelgate pull ${entry.hubRef}` : null;
}
