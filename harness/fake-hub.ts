import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";

/**
 * A local HTTP server speaking the parts of the Hugging Face hub protocol `modelgate pull` uses:
 * - `GET /api/models/{repo}` and `/api/models/{repo}/revision/{rev}` with `siblings` (`?blobs=true` adds size,
 *   blobId and `lfs: {sha256, size, pointerSize}`);
 * - `HEAD|GET /{repo}/resolve/{rev}/{file}`: LFS files answer 302 to a CDN-like URL on another port (`/cdn-lfs/...`) with
 *   `X-Linked-Etag`, `X-Linked-Size`, `X-Repo-Commit` and `ETag`; regular files answer 200 with the git blob sha1 as
 *   ETag;
 * - the CDN path honours `Range: bytes=N-` with 206 and `Content-Range`.
 * Knobs let a test stall a download part way, corrupt the bytes, or require a token.
 */

export interface FakeFile {
  content: Buffer;
  lfs: boolean;
  sha256: string;
  gitSha1: string;
}

export interface HubRequest {
  method: string;
  path: string;
  range: string | null;
  authorization: string | null;
}

export interface FakeHubBehaviour {
  /** CDN GETs of this file write this many bytes (counted from the start of the file) and then hang. */
  stallAt?: { file: string; byte: number } | null;
  /** Flip a byte in the served content of this file (headers keep the true sha256). */
  corrupt?: string | null;
  /** When set, every hub (not CDN) request must carry `Authorization: Bearer <token>`. */
  requireToken?: string | null;
  /** Bytes per second on the CDN (0 = unthrottled). */
  bytesPerSecond?: number;
  /**
   * A hostile mirror: the repo's listing also names `name` (any text, `../` included), and every path the hub does
   * not know is answered with `content`, as a regular file (so whatever URL the client makes of the name gets it).
   */
  hostile?: { repo: string; name: string; content: Buffer } | null;
}

export interface FakeHub {
  endpoint: string;
  requests: HubRequest[];
  behaviour: FakeHubBehaviour;
  /** Fires once per CDN response when a stall point is reached. */
  stalled: Promise<void>;
  file(repo: string, name: string): FakeFile;
  close(): Promise<void>;
}

export type RepoFiles = Record<string, Buffer | string>;

const commitSha = "0123456789abcdef0123456789abcdef01234567";

function gitBlobSha1(content: Buffer): string {
  return createHash("sha1").update(`blob ${content.length}\0`).update(content).digest("hex");
}

function isLfs(name: string): boolean {
  return /\.(gguf|onnx|onnx_data|bin|safetensors)$/.test(name);
}

/** Reads a folder into `{ "rel/path": Buffer }`. */
export function folderFiles(dir: string, prefix = ""): RepoFiles {
  const files: RepoFiles = {};
  for (const name of readdirSync(dir)) {
    const full = path.join(dir, name);
    const rel = prefix ? `${prefix}/${name}` : name;
    if (statSync(full).isDirectory()) Object.assign(files, folderFiles(full, rel));
    else files[rel] = readFileSync(full);
  }
  return files;
}

export async function startFakeHub(repos: Record<string, RepoFiles>, behaviour: FakeHubBehaviour = {}): Promise<FakeHub> {
  const store = new Map<string, Map<string, FakeFile>>();
  for (const [repo, files] of Object.entries(repos)) {
    const map = new Map<string, FakeFile>();
    for (const [name, value] of Object.entries(files)) {
      const content = typeof value === "string" ? readFileSync(value) : value;
      const file: FakeFile = {
        content,
        lfs: isLfs(name),
        sha256: createHash("sha256").update(content).digest("hex"),
        gitSha1: gitBlobSha1(content),
      };
      map.set(name, file);
    }
    store.set(repo, map);
  }

  const requests: HubRequest[] = [];
  let signalStall: () => void = () => {};
  const hub: FakeHub = {
    endpoint: "",
    requests,
    behaviour,
    stalled: new Promise<void>((resolve) => (signalStall = resolve)),
    file(repo, name) {
      return store.get(repo)!.get(name)!;
    },
    close: async () => {
      for (const s of [server, cdn]) {
        s.closeAllConnections();
        await new Promise<void>((resolve) => s.close(() => resolve()));
      }
    },
  };

  const json = (res: http.ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };

  let cdnOrigin = "";
  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://hub");
    const pathname = decodeURIComponent(url.pathname);
    requests.push({ method: req.method ?? "GET", path: url.pathname + url.search, range: req.headers.range ?? null, authorization: req.headers.authorization ?? null });
    const isCdn = pathname.startsWith("/cdn-lfs/");
    if (!isCdn && behaviour.requireToken && req.headers.authorization !== `Bearer ${behaviour.requireToken}`) {
      res.writeHead(401, { "content-type": "application/json", "x-error-code": "GatedRepo" });
      res.end(JSON.stringify({ error: "Access to this repo is restricted" }));
      return;
    }

    const api = /^\/api\/models\/([^/]+\/[^/]+)(?:\/revision\/([^/]+))?$/.exec(pathname);
    if (api) {
      const files = store.get(api[1]);
      if (!files) return json(res, 404, { error: "Repository not found" });
      const blobs = url.searchParams.get("blobs") === "true";
      const siblings = [...files].map(([name, f]) => {
        if (!blobs) return { rfilename: name };
        return {
          rfilename: name,
          size: f.content.length,
          blobId: f.lfs ? createHash("sha1").update(name).digest("hex") : f.gitSha1,
          ...(f.lfs ? { lfs: { sha256: f.sha256, size: f.content.length, pointerSize: 134 } } : {}),
        };
      });
      const hostile = behaviour.hostile?.repo === api[1] ? behaviour.hostile : null;
      if (hostile) siblings.push({ rfilename: hostile.name, size: hostile.content.length, blobId: gitBlobSha1(hostile.content) });
      return json(res, 200, { id: api[1], modelId: api[1], sha: commitSha, siblings });
    }

    const resolve = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(pathname);
    if (resolve) {
      const file = store.get(resolve[1])?.get(resolve[3]);
      if (!file && behaviour.hostile) return serveHostile(req, res, behaviour.hostile.content);
      if (!file) {
        res.writeHead(404, { "x-error-code": "EntryNotFound" });
        res.end("Entry not found");
        return;
      }
      if (file.lfs) {
        res.writeHead(302, {
          location: `${cdnOrigin}/cdn-lfs/repos/${resolve[1]}/${file.sha256}?response-content-disposition=attachment&Expires=9999999999&Signature=fake`,
          "x-linked-etag": `"${file.sha256}"`,
          "x-linked-size": String(file.content.length),
          "x-repo-commit": commitSha,
          etag: `"${file.sha256}"`,
          "content-length": "0",
        });
        res.end();
        return;
      }
      res.writeHead(200, { etag: `"${file.gitSha1}"`, "content-length": String(file.content.length), "x-repo-commit": commitSha, "accept-ranges": "bytes" });
      res.end(req.method === "HEAD" ? undefined : file.content);
      return;
    }

    if (isCdn) {
      const cdn = /^\/cdn-lfs\/repos\/([^/]+\/[^/]+)\/([0-9a-f]{64})$/.exec(pathname);
      const found = cdn ? [...(store.get(cdn[1]) ?? new Map<string, FakeFile>())].find(([, f]) => f.lfs && f.sha256 === cdn[2]) : undefined;
      if (!cdn || !found) {
        res.writeHead(404);
        res.end();
        return;
      }
      const sha = cdn[2];
      const [fileName, file] = found;
      let content = file.content;
      if (behaviour.corrupt && behaviour.corrupt === fileName) {
        content = Buffer.from(content);
        content[Math.floor(content.length / 2)] ^= 0xff;
      }
      let start = 0;
      const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? "");
      if (range) {
        start = Number(range[1]);
        if (start >= content.length) {
          res.writeHead(416, { "content-range": `bytes */${content.length}` });
          res.end();
          return;
        }
        res.writeHead(206, {
          "content-range": `bytes ${start}-${content.length - 1}/${content.length}`,
          "content-length": String(content.length - start),
          etag: `"${sha}"`,
          "accept-ranges": "bytes",
        });
      } else {
        res.writeHead(200, { "content-length": String(content.length), etag: `"${sha}"`, "accept-ranges": "bytes" });
      }
      if (req.method === "HEAD") return res.end();
      const stall = behaviour.stallAt && behaviour.stallAt.file === fileName ? behaviour.stallAt.byte : null;
      const end = stall !== null && stall > start ? stall : content.length;
      void (async () => {
        const chunk = 16 * 1024;
        for (let at = start; at < end; at += chunk) {
          const piece = content.subarray(at, Math.min(end, at + chunk));
          if (!res.write(piece)) await new Promise((r) => res.once("drain", r));
          if (behaviour.bytesPerSecond) await new Promise((r) => setTimeout(r, (piece.length / behaviour.bytesPerSecond!) * 1000));
          if (res.destroyed) return;
        }
        if (end < content.length) {
          signalStall();
          return; // hang: never end the response
        }
        res.end();
      })();
      return;
    }
    if (behaviour.hostile) return serveHostile(req, res, behaviour.hostile.content);
    json(res, 404, { error: "not found" });
  };
  const serveHostile = (req: http.IncomingMessage, res: http.ServerResponse, content: Buffer) => {
    res.writeHead(200, { etag: `"${gitBlobSha1(content)}"`, "content-length": String(content.length), "x-repo-commit": commitSha });
    res.end(req.method === "HEAD" ? undefined : content);
  };
  // The CDN listens on its own port: another origin, as cdn-lfs.hf.co is to huggingface.co.
  const server = http.createServer(handler);
  const cdn = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  await new Promise<void>((resolve) => cdn.listen(0, "127.0.0.1", resolve));
  cdnOrigin = `http://127.0.0.1:${(cdn.address() as AddressInfo).port}`;
  hub.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return hub;
}
