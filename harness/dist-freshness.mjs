// Whether dist/ (the compiled build, `npm run build`) was built after the last change under src/: then the tests may
// spawn the CLI and servers from it, as `npm start` runs them, instead of through tsx. Plain JavaScript, so that
// scripts/test.mjs (plain node) can ask too before the run, and build it when not.
import { execFileSync } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import path from "node:path";

/** `npm run build` of the tree at `root` (tsconfig.build.json into dist/), its output passed through. */
export function buildDist(root) {
  execFileSync(process.execPath, [path.join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json"], { cwd: root, stdio: "inherit" });
}

export function distIsFresh(root) {
  let built;
  try {
    built = statSync(path.join(root, "dist/cli/run.js")).mtimeMs;
  } catch {
    return false;
  }
  for (const entry of readdirSync(path.join(root, "src"), { recursive: true, withFileTypes: true })) {
    if (entry.isFile() && statSync(path.join(entry.parentPath, entry.name)).mtimeMs > built) return false;
  }
  return true;
}
