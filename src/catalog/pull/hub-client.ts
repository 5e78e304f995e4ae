import { unsafeNameReason } from "./hub-paths.ts";

/**
 * The few Hugging Face hub calls `modelgate pull` needs: the repo's file list (`/api/models/{repo}/revision/{rev}
 * ?blobs=true`, with sizes and LFS sha256) and a file's metadata (`HEAD /{repo}/resolve/{rev}/{file}`, whose 302
 * carries X-Linked-Etag / X-Linked-Size and points at the CDN).
 */

export interface HubSibling {
  /** Path inside the repo, e.g. `onnx/model.onnx`. */
  name: string;
  size: number | null;
  /** sha256 of the content for LFS files. */
  sha256: string | null;
  /** Git blob id (sha1 of `blob <size>\0<content>`) for regular files. */
  blobId: string | null;
}

export interface HubRepoInfo {
  repo: string;
  /** The commit the revision resolved to, when the hub says. */
  commit: string | null;
  siblings: HubSibling[];
}

export interface HubFileMeta {
  /** Where to GET the bytes (the CDN URL after the hub's redirect, or the resolve URL itself). */
  url: string;
  size: number | null;
  sha256: string | null;
  /** Git blob sha1 for non-LFS files. */
  gitSha1: string | null;
  commit: string | null;
}

export class HubError extends Error {
  constructor(
    readonly code: "hub_unreachable" | "hub_not_found" | "hub_unauthorized" | "hub_error",
    message: string,
  ) {
    super(message);
    this.name = "HubError";
  }
}

export interface HubClientOptions {
  endpoint?: string;
  token?: string | null;
  fetch?: typeof fetch;
}

/** HF_ENDPOINT and HF_TOKEN from the environment, as huggingface_hub reads them. */
export function hubOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): HubClientOptions {
  return {
    endpoint: env.HF_ENDPOINT || "https://huggingface.co",
    token: env.HF_TOKEN || env.HUGGING_FACE_HUB_TOKEN || null,
  };
}

/** `"abc"` / `W/"abc"` -> `abc`. */
export function normalizeEtag(etag: string | null): string | null {
  if (!etag) return null;
  return etag.replace(/^W\//, "").replace(/^"|"$/g, "");
}

const sha256Pattern = /^[0-9a-f]{64}$/;
const sha1Pattern = /^[0-9a-f]{40}$/;

function encodePath(file: string): string {
  return file.split("/").map(encodeURIComponent).join("/");
}

export class HubClient {
  readonly endpoint: string;
  private readonly token: string | null;
  private readonly fetchImpl: typeof fetch;

  constructor(options: HubClientOptions = {}) {
    this.endpoint = (options.endpoint ?? "https://huggingface.co").replace(/\/+$/, "");
    this.token = options.token ?? null;
    this.fetchImpl = options.fetch ?? fetch;
  }

  /** Headers for a URL: the token goes to the hub only, never to a CDN on another origin. */
  headersFor(url: string, extra: Record<string, string> = {}): Record<string, string> {
    const headers: Record<string, string> = { "user-agent": "modelgate/0.1", ...extra };
    if (this.token && new URL(url).origin === new URL(this.endpoint).origin) headers.authorization = `Bearer ${this.token}`;
    return headers;
  }

  async request(url: string, init: RequestInit & { headers?: Record<string, string> }): Promise<Response> {
    try {
      return await this.fetchImpl(url, { ...init, headers: this.headersFor(url, init.headers) });
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new HubError("hub_unreachable", `cannot reach ${new URL(url).origin}: ${cause?.code ?? cause?.message ?? (err as Error).message}`);
    }
  }

  private failure(res: Response, what: string): HubError {
    if (res.status === 401 || res.status === 403) {
      return new HubError(
        "hub_unauthorized",
        `${what}: the hub answered ${res.status}; the repo may be gated or private: set HF_TOKEN to a token with access`,
      );
    }
    if (res.status === 404) return new HubError("hub_not_found", `${what}: not found on ${this.endpoint} (404)`);
    return new HubError("hub_error", `${what}: the hub answered ${res.status} ${res.statusText}`);
  }

  async repoInfo(repo: string, revision: string): Promise<HubRepoInfo> {
    const url = `${this.endpoint}/api/models/${repo}/revision/${encodeURIComponent(revision)}?blobs=true`;
    const res = await this.request(url, { method: "GET" });
    if (!res.ok) {
      await res.body?.cancel();
      throw this.failure(res, `repo ${repo}@${revision}`);
    }
    const body = (await res.json()) as {
      sha?: string;
      siblings?: { rfilename: string; size?: number; blobId?: string; lfs?: { sha256?: string; oid?: string; size?: number } }[];
    };
    const siblings = (body.siblings ?? []).map((s) => {
      const lfsSha = s.lfs?.sha256 ?? s.lfs?.oid?.replace(/^sha256:/, "") ?? null;
      return {
        name: s.rfilename,
        size: s.lfs?.size ?? s.size ?? null,
        sha256: lfsSha && sha256Pattern.test(lfsSha) ? lfsSha : null,
        blobId: s.lfs ? null : (s.blobId ?? null),
      };
    });
    // A listing is the mirror's word: one name that could write outside the repo's folder refuses the whole repo.
    for (const { name } of siblings) {
      const reason = unsafeNameReason(name);
      if (reason) throw new HubError("hub_error", `repo ${repo}@${revision}: the hub lists the file name ${JSON.stringify(name)}, which ${reason}; refusing to pull from it`);
    }
    return { repo, commit: body.sha ?? null, siblings };
  }

  resolveUrl(repo: string, revision: string, file: string): string {
    return `${this.endpoint}/${repo}/resolve/${encodeURIComponent(revision)}/${encodePath(file)}`;
  }

  /**
   * HEAD on the resolve URL without following the CDN redirect, so the X-Linked-* headers of the hub's own answer
   * can be read. Relative redirects (a renamed repo) are followed; an absolute one is the CDN.
   */
  async fileMeta(repo: string, revision: string, file: string): Promise<HubFileMeta> {
    let url = this.resolveUrl(repo, revision, file);
    for (let hop = 0; hop < 5; hop++) {
      const res = await this.request(url, { method: "HEAD", redirect: "manual" });
      await res.body?.cancel();
      const linkedEtag = normalizeEtag(res.headers.get("x-linked-etag"));
      const etag = linkedEtag ?? normalizeEtag(res.headers.get("etag"));
      const sizeHeader = res.headers.get("x-linked-size") ?? (res.status === 200 ? res.headers.get("content-length") : null);
      const meta = {
        size: sizeHeader !== null && /^[0-9]+$/.test(sizeHeader) ? Number(sizeHeader) : null,
        sha256: etag && sha256Pattern.test(etag) ? etag : null,
        gitSha1: !linkedEtag && etag && sha1Pattern.test(etag) ? etag : null,
        commit: res.headers.get("x-repo-commit"),
      };
      if (res.status >= 300 && res.status < 400) {
        const location = res.headers.get("location");
        if (!location) throw new HubError("hub_error", `${repo}/${file}: redirect without a Location`);
        const relative = !/^[a-z][a-z0-9+.-]*:\/\//i.test(location);
        const target = new URL(location, url).toString();
        if (relative && !meta.sha256 && !meta.size) {
          url = target;
          continue;
        }
        return { url: target, ...meta };
      }
      if (res.ok) return { url, ...meta };
      throw this.failure(res, `${repo}/${file}@${revision}`);
    }
    throw new HubError("hub_error", `${repo}/${file}: too many redirects`);
  }
}
