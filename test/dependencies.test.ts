// Issue 37: no dependency the code does not import, and no import of a package package.json lacks (knip, with its
// configuration and the reasons for what it must not flag in knip.jsonc).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import path from "node:path";
import { repoRoot } from "../harness/server.ts";

interface KnipIssue {
  file: string;
  dependencies: { name: string }[];
  devDependencies: { name: string }[];
  unlisted: { name: string }[];
  unresolved: { name: string }[];
  binaries: { name: string }[];
}

/** Runs knip's dependency checks on a folder; resolves with its exit code and one line per finding. */
function knip(dir: string): Promise<{ code: number; findings: string[] }> {
  const bin = path.join(repoRoot, "node_modules/knip/bin/knip.js");
  const args = [bin, "--directory", dir, "--include", "dependencies,unlisted,unresolved,binaries", "--reporter", "json", "--no-progress"];
  return new Promise((resolve, reject) => {
    execFile(process.execPath, args, { cwd: dir }, (err, stdout, stderr) => {
      const code = err ? Number((err as { code?: number }).code ?? 1) : 0;
      let parsed: { issues: KnipIssue[] };
      try {
        parsed = JSON.parse(stdout) as { issues: KnipIssue[] };
      } catch {
        reject(new Error(`knip printed no report (exit ${code}): ${stderr || stdout}`));
        return;
      }
      const findings = parsed.issues.flatMap((issue) =>
        (["dependencies", "devDependencies", "unlisted", "unresolved", "binaries"] as const).flatMap((kind) => issue[kind].map((d) => `${kind}: ${d.name} (${issue.file})`)),
      );
      resolve({ code, findings });
    });
  });
}

test("issue 37 dependencies: every package in package.json is used, and every package the code imports is in package.json", async () => {
  const { code, findings } = await knip(repoRoot);
  assert.deepEqual(findings, []);
  assert.equal(code, 0);
});

test("issue 37 dependencies: a fixture with an unused and an unlisted dependency fails the check, naming both", async () => {
  const { code, findings } = await knip(path.join(repoRoot, "test/fixtures/knip"));
  assert.deepEqual(findings.sort(), ["dependencies: left-pad (package.json)", "unlisted: chalk (src/index.js)"]);
  assert.notEqual(code, 0);
});
