import { accessSync, constants } from "node:fs";
import type { LlamaSettings, ModelEntry } from "../../config/app-config.ts";
import { unsupportedCapabilities } from "../capabilities.ts";
import { builtLlamaServer } from "./llama-server-build.ts";
import { llamaServerSupport, type LlamaServerOptions } from "./llama-server.support.ts";

/**
 * Where an `engine: llama` entry runs (`llama.server`). In-process batching on node-llama-cpp's prebuilt binary
 * gains little from concurrent streams (docs/llama-batching.md), so with `auto` an entry with `parallel > 1` runs
 * on the managed llama-server when one is built (`modelgate engines build llama-server`, or `llama.serverBinary`)
 * and llama-server can do everything the entry claims (one llama-server does chat, or embeddings, or rerank: an
 * entry claiming chat and embeddings stays in-process). `always` runs every llama entry there, and is a config
 * error when it cannot; `never` keeps them all in-process.
 *
 * Returns the entry to serve (engine `llama-server`, `configuredEngine: "llama"`), the entry itself, or throws
 * an Error whose message the config loader reports.
 */
export function placeLlamaEntry(entry: ModelEntry, settings: LlamaSettings, dataDir: string): ModelEntry {
  if (entry.engine !== "llama" || settings.server === "never") return entry;
  if (settings.server === "auto" && entry.parallel <= 1) return entry;
  const always = settings.server === "always";
  const cannot = unsupportedCapabilities(entry, llamaServerSupport(entry));
  if (cannot.length) {
    if (!always) return entry;
    throw new Error(`llama.server is "always", but llama-server cannot serve ${cannot.map((c) => `"${c}"`).join(", ")} for this model (one llama-server serves chat, embeddings or rerank); set llama.server to auto`);
  }
  let binary: string | null;
  if (settings.serverBinary) {
    try {
      accessSync(settings.serverBinary, constants.X_OK);
    } catch {
      throw new Error(`llama.serverBinary ${settings.serverBinary} is not an executable file`);
    }
    binary = settings.serverBinary;
  } else {
    binary = builtLlamaServer(dataDir);
  }
  if (!binary) {
    if (!always) return entry;
    throw new Error(`llama.server is "always", but no llama-server is built in ${dataDir}: run \`modelgate engines build llama-server\` (or set llama.serverBinary)`);
  }
  const own = entry.options as { threads?: number; flashAttention?: "auto" | boolean };
  const flash = own.flashAttention === undefined || own.flashAttention === "auto" ? "auto" : own.flashAttention ? "on" : "off";
  const options: LlamaServerOptions = { binary, threads: own.threads ?? 1, args: ["-fa", flash] };
  return { ...entry, engine: "llama-server", configuredEngine: "llama", options };
}
