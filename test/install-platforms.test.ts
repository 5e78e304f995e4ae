import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { repoRoot } from "../harness/server.ts";

interface LockEntry {
  name?: string;
  version?: string;
  os?: string[];
  cpu?: string[];
  libc?: string[];
  link?: boolean;
}

interface Platform {
  os: string;
  cpu: string;
  libc: string | null;
  /** Packages that must be in this platform's install: the CPU binaries of every native dependency. */
  binaries: string[];
}

const platforms: Record<string, Platform> = {
  "linux-x64": {
    os: "linux",
    cpu: "x64",
    libc: "glibc",
    binaries: ["@node-llama-cpp/linux-x64", "@esbuild/linux-x64", "@img/sharp-linux-x64", "@img/sharp-libvips-linux-x64", "onnxruntime-node", "better-sqlite3", "@koromix/koffi-linux-x64"],
  },
  "linux-arm64": {
    os: "linux",
    cpu: "arm64",
    libc: "glibc",
    binaries: ["@node-llama-cpp/linux-arm64", "@esbuild/linux-arm64", "@img/sharp-linux-arm64", "@img/sharp-libvips-linux-arm64", "onnxruntime-node", "better-sqlite3", "@koromix/koffi-linux-arm64"],
  },
  "darwin-arm64": {
    os: "darwin",
    cpu: "arm64",
    libc: null,
    // Apple silicon's only llama.cpp build is the Metal one: Metal is part of macOS, so it is the CPU default there.
    binaries: ["@node-llama-cpp/mac-arm64-metal", "@esbuild/darwin-arm64", "@img/sharp-darwin-arm64", "@img/sharp-libvips-darwin-arm64", "onnxruntime-node", "better-sqlite3"],
  },
};

const gpuVariant = /^@node-llama-cpp\/.*-(cuda|cuda-ext|vulkan)$/;

/** npm's own rule for os/cpu/libc fields: a list of allowed values, or of `!`-negated ones. */
function allows(field: string[] | undefined, value: string | null): boolean {
  if (!field || field.length === 0) return true;
  if (value === null) return true;
  const denied = field.filter((v) => v.startsWith("!")).map((v) => v.slice(1));
  if (denied.includes(value)) return false;
  const allowed = field.filter((v) => !v.startsWith("!"));
  return allowed.length === 0 || allowed.includes(value);
}

/** The packages a platform's `npm ci` installs from the lock file: the entries whose os, cpu and libc match it. */
function resolvedFor(lock: { packages: Record<string, LockEntry> }, platform: Platform): Map<string, LockEntry> {
  const out = new Map<string, LockEntry>();
  for (const [where, entry] of Object.entries(lock.packages)) {
    if (where === "") continue;
    if (!allows(entry.os, platform.os) || !allows(entry.cpu, platform.cpu) || !allows(entry.libc, platform.libc)) continue;
    out.set(where.slice(where.lastIndexOf("node_modules/") + "node_modules/".length), entry);
  }
  return out;
}

const lock = JSON.parse(readFileSync(path.join(repoRoot, "package-lock.json"), "utf8")) as { packages: Record<string, LockEntry> };

for (const [name, platform] of Object.entries(platforms)) {
  test(`install: the lock file gives ${name} its CPU binaries and no GPU variant`, () => {
    const installed = resolvedFor(lock, platform);
    for (const binary of platform.binaries) assert.ok(installed.has(binary), `${name} resolves ${binary}`);
    for (const [pkg, entry] of installed) {
      if (!gpuVariant.test(pkg)) continue;
      // The slot is kept by an empty package (package.json overrides), so node-llama-cpp finds no GPU build there.
      assert.equal(entry.name, "@favware/skip-dependency", `${name} installs the GPU variant ${pkg}`);
    }
  });
}

test("install: no linux-x64 binary is a plain dependency (each platform picks its own)", () => {
  const pkg = JSON.parse(readFileSync(path.join(repoRoot, "package.json"), "utf8")) as { dependencies: Record<string, string> };
  const pinned = Object.keys(pkg.dependencies).filter((d) => /linux-x64|darwin|win32|arm64/.test(d));
  assert.deepEqual(pinned, []);
});
