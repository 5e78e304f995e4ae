import { mkdir, rename, rm } from "node:fs/promises";
import path from "node:path";
import { hubRepoDir, parseHubRef, type HubRef } from "../../config/hub-ref.ts";
import { downloadFile, isVerifiedCopy, type DownloadEvents, type DownloadTarget } from "./download-file.ts";
import { HubClient, type HubSibling } from "./hub-client.ts";
import { checkName, insideModels } from "./hub-paths.ts";
import { planGgufFile, planOnnxFiles } from "./plan-files.ts";

export interface PulledFile {
  name: string;
  size: number;
  /** false when a verified copy was already in place. */
  downloaded: boolean;
  resumedFrom: number;
  verified: "sha256" | "git-sha1" | "size" | "none";
}

export interface PullResult {
  ref: string;
  repo: string;
  revision: string;
  commit: string | null;
  kind: "gguf" | "onnx";
  dtype: string | null;
  /** The GGUF file, or the repo folder of an ONNX layout. */
  path: string;
  files: PulledFile[];
  downloadedBytes: number;
  totalBytes: number;
}

export interface PullOptions {
  dataDir: string;
  client: HubClient;
  events: DownloadEvents;
  /** Status lines (which files, skipped ones). */
  log(line: string): void;
  /** transformers.js dtype for ONNX layouts (default fp32, as the ONNX engines load). */
  dtype?: string | null;
  signal?: AbortSignal;
  idleTimeoutMs?: number;
}

/** Where unfinished ONNX layouts are assembled, so a half-pulled folder never sits where a model is expected. */
function stagingDir(dataDir: string, repo: string): string {
  return insideModels(dataDir, path.join(dataDir, "models", ".partial", ...repo.split("/")));
}

async function targetFor(client: HubClient, ref: HubRef, sibling: HubSibling, dest: string): Promise<DownloadTarget> {
  const meta = await client.fileMeta(ref.repo, ref.revision, sibling.name);
  return {
    url: meta.url,
    dest,
    size: meta.size ?? sibling.size,
    sha256: meta.sha256 ?? sibling.sha256,
    gitSha1: meta.sha256 || sibling.sha256 ? null : (meta.gitSha1 ?? sibling.blobId),
    label: `${ref.repo}/${sibling.name}`,
  };
}

function alreadyThere(target: DownloadTarget): PulledFile {
  const verified = target.sha256 ? "sha256" : target.gitSha1 ? "git-sha1" : target.size !== null ? "size" : "none";
  return { name: target.label, size: target.size ?? 0, downloaded: false, resumedFrom: 0, verified };
}

async function fetchOne(target: DownloadTarget, options: PullOptions): Promise<PulledFile> {
  const name = target.label;
  if (await isVerifiedCopy(target)) return alreadyThere(target);
  const result = await downloadFile(options.client, target, options.events, { signal: options.signal, idleTimeoutMs: options.idleTimeoutMs });
  return { name, size: result.resumedFrom + result.bytes, downloaded: true, resumedFrom: result.resumedFrom, verified: result.verified };
}

function summarize(base: Omit<PullResult, "downloadedBytes" | "totalBytes">): PullResult {
  return {
    ...base,
    downloadedBytes: base.files.filter((f) => f.downloaded).reduce((sum, f) => sum + f.size - f.resumedFrom, 0),
    totalBytes: base.files.reduce((sum, f) => sum + f.size, 0),
  };
}

/** Pulls one hub ref (`hf:org/repo`, `hf:org/repo:file.gguf`, `hf:org/repo:QUANT`) into <dataDir>/models/org/repo. */
export async function pullHubRef(refText: string, options: PullOptions): Promise<PullResult> {
  const ref = parseHubRef(refText);
  const { dataDir } = options;
  const repoDir = insideModels(dataDir, hubRepoDir(dataDir, checkName(ref.repo, "the repo")));
  if (ref.file) checkName(ref.file, "the file");
  const info = await options.client.repoInfo(ref.repo, ref.revision);

  if (ref.file || ref.quant) {
    const sibling = planGgufFile(info.siblings, ref);
    // A quant pick lands at the top of the repo folder, where the catalog looks for it.
    const dest = insideModels(dataDir, path.join(repoDir, ref.file ?? path.posix.basename(checkName(sibling.name, "the hub's file"))));
    const target = await targetFor(options.client, ref, sibling, dest);
    options.log(`${ref.repo}: ${sibling.name}`);
    const file = await fetchOne(target, options);
    return summarize({ ref: refText, repo: ref.repo, revision: ref.revision, commit: info.commit, kind: "gguf", dtype: null, path: dest, files: [file] });
  }

  // The ONNX engines load `dtype ?? "fp32"`, so the pull fetches the same weights.
  const dtype = options.dtype ?? "fp32";
  const planned = planOnnxFiles(info.siblings, dtype, ref.repo);
  options.log(`${ref.repo} (${dtype}): ${planned.length} files`);
  const stage = stagingDir(options.dataDir, ref.repo);
  const files: PulledFile[] = [];
  const staged: string[] = [];
  for (const sibling of planned) {
    checkName(sibling.name, "the hub's file");
    const finalPath = insideModels(dataDir, path.join(repoDir, sibling.name));
    const stagePath = insideModels(dataDir, path.join(stage, sibling.name));
    const target = await targetFor(options.client, ref, { ...sibling }, stagePath);
    if (await isVerifiedCopy({ ...target, dest: finalPath })) {
      files.push(alreadyThere(target));
      continue;
    }
    files.push(await fetchOne(target, options));
    staged.push(sibling.name);
  }

  // Everything is verified: move it in, weights first and config.json last.
  staged.sort((a, b) => Number(a === "config.json") - Number(b === "config.json"));
  for (const name of staged) {
    const finalPath = insideModels(dataDir, path.join(repoDir, name));
    await mkdir(path.dirname(finalPath), { recursive: true });
    await rename(insideModels(dataDir, path.join(stage, name)), finalPath);
  }
  await rm(stage, { recursive: true, force: true });
  return summarize({ ref: refText, repo: ref.repo, revision: ref.revision, commit: info.commit, kind: "onnx", dtype, path: repoDir, files });
}
