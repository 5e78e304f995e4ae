import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

/**
 * The console's own files: console/ at the package root, served as they are (no build step). Found upwards from
 * here, since this file runs from src/, dist/ or a build made elsewhere (test/compiled-build.test.ts).
 */
export function findConsoleDir(): string {
  for (let dir = import.meta.dirname; path.dirname(dir) !== dir; dir = path.dirname(dir)) {
    const candidate = path.join(dir, "console");
    if (existsSync(path.join(candidate, "index.html"))) return candidate;
  }
  throw new Error(`no console/index.html in any folder above ${import.meta.dirname}`);
}

/** One file the console serves, read once at start: its bytes, content type and a strong ETag of its content. */
export interface ConsoleFile {
  body: Buffer;
  type: string;
  etag: string;
}

const contentTypes: Record<string, string> = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
};

function consoleFile(file: string): ConsoleFile {
  const body = readFileSync(file);
  const type = contentTypes[path.extname(file)];
  if (!type) throw new Error(`no content type for console file ${file}`);
  return { body, type, etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 32)}"` };
}

/** console/'s scripts and styles (not the page), by their path under it: "app.js", "pages/usage.js". */
export function assetFiles(consoleDir: string): Map<string, ConsoleFile> {
  const files = new Map<string, ConsoleFile>();
  for (const entry of readdirSync(consoleDir, { recursive: true, encoding: "utf8" })) {
    const name = entry.split(path.sep).join("/");
    if (contentTypes[path.extname(name)]) files.set(name, consoleFile(path.join(consoleDir, entry)));
  }
  return files;
}

const require = createRequire(import.meta.url);
/** A file beside a package entry's own (the ES module build sits next to the CommonJS one). */
const beside = (entry: string, file: string) => path.join(path.dirname(require.resolve(entry)), file);

/** The UI libraries, from node_modules, under the names the page's import map uses. */
export function vendorFiles(): Map<string, ConsoleFile> {
  return new Map([
    ["preact.js", consoleFile(beside("preact", "preact.module.js"))],
    ["hooks.js", consoleFile(beside("preact/hooks", "hooks.module.js"))],
    ["htm.js", consoleFile(beside("htm", "htm.module.js"))],
    ["uplot.js", consoleFile(beside("uplot", "uPlot.esm.js"))],
    ["uplot.css", consoleFile(beside("uplot", "uPlot.min.css"))],
  ]);
}

/**
 * The page, and the Content-Security-Policy that lets only this server's scripts run: the one inline script is the
 * import map, allowed by its hash. Everything not listed is refused (default-src 'none').
 */
export function consolePage(consoleDir: string): { html: string; csp: string } {
  const html = readFileSync(path.join(consoleDir, "index.html"), "utf8");
  const importMap = /<script type="importmap">([\s\S]*?)<\/script>/.exec(html)![1]!;
  const hash = createHash("sha256").update(importMap).digest("base64");
  const csp = [
    "default-src 'none'",
    `script-src 'self' 'sha256-${hash}'`,
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'self'",
  ].join("; ");
  return { html, csp };
}
