import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

/** The console's own files (console/ at the repo root: served as they are, no build step). */
export const consoleDir = path.resolve(import.meta.dirname, "../../../console");

const require = createRequire(import.meta.url);
/** A file beside a package entry's own (the ES module build sits next to the CommonJS one). */
const beside = (entry: string, file: string) => path.join(path.dirname(require.resolve(entry)), file);

/** The UI libraries, served from node_modules under the names the page's import map uses. */
export const vendorFiles: Record<string, { file: string; type: string }> = {
  "preact.js": { file: beside("preact", "preact.module.js"), type: "text/javascript" },
  "hooks.js": { file: beside("preact/hooks", "hooks.module.js"), type: "text/javascript" },
  "htm.js": { file: beside("htm", "htm.module.js"), type: "text/javascript" },
  "uplot.js": { file: beside("uplot", "uPlot.esm.js"), type: "text/javascript" },
  "uplot.css": { file: beside("uplot", "uPlot.min.css"), type: "text/css" },
};

/**
 * The page, and the Content-Security-Policy that lets only this server's scripts run: the one inline script is the
 * import map, allowed by its hash.
 */
export function consolePage(): { html: string; csp: string } {
  const html = readFileSync(path.join(consoleDir, "index.html"), "utf8");
  const importMap = /<script type="importmap">([\s\S]*?)<\/script>/.exec(html)![1]!;
  const hash = createHash("sha256").update(importMap).digest("base64");
  const csp = [
    "default-src 'self'",
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
