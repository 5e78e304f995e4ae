import { spawn, spawnSync } from "node:child_process";
import { accessSync, constants, existsSync, mkdirSync, openSync, readFileSync, readSync, closeSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/*
 * llama.cpp's own server, built from the llama.cpp source node-llama-cpp ships (its `llama/gitRelease.bundle`, a
 * git bundle of the exact commit its prebuilt binaries come from), into <dataDir>/engines/llama-server/. The llama
 * engine runs `parallel > 1` entries on it when it is there (`llama.server: auto`), see llama-server-placement.ts.
 */

/** Where a build lives under the data dir: `src/` (the clone), `build/` (cmake's), and `build-info.json`. */
export function llamaServerHome(dataDir: string): string {
  return path.join(dataDir, "engines", "llama-server");
}

/** The binary a build leaves in the data dir (its shared libraries beside it). */
export function managedLlamaServerBinary(dataDir: string): string {
  return path.join(llamaServerHome(dataDir), "build", "bin", "llama-server");
}

/** The binary in the data dir when a build finished there (its build-info.json is written last), else null. */
export function builtLlamaServer(dataDir: string): string | null {
  const binary = managedLlamaServerBinary(dataDir);
  if (!existsSync(path.join(llamaServerHome(dataDir), "build-info.json"))) return null;
  try {
    accessSync(binary, constants.X_OK);
    return binary;
  } catch {
    return null;
  }
}

export interface LlamaCppSource {
  /** node-llama-cpp's folder. */
  packageDir: string;
  packageVersion: string;
  /** The git bundle holding llama.cpp's source. */
  bundle: string;
  /** The llama.cpp commit of the bundle (its HEAD). */
  commit: string;
}

/** node-llama-cpp's folder: its entry point resolved as an import would (its exports hide package.json), walked up. */
function nodeLlamaCppDir(): string {
  let at: string;
  try {
    at = path.dirname(fileURLToPath(import.meta.resolve("node-llama-cpp")));
  } catch {
    throw new BuildError("no_source", "node-llama-cpp is not installed (run npm ci in Modelgate's folder)");
  }
  for (; path.dirname(at) !== at; at = path.dirname(at)) {
    const manifest = path.join(at, "package.json");
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, "utf8")) as { name?: string }).name === "node-llama-cpp") return at;
  }
  throw new BuildError("no_source", "cannot find node-llama-cpp's package.json");
}

/** The llama.cpp source node-llama-cpp ships: the bundle and its commit, read from the bundle's text header. */
export function llamaCppSource(): LlamaCppSource {
  const packageDir = nodeLlamaCppDir();
  const manifest = path.join(packageDir, "package.json");
  const packageVersion = (JSON.parse(readFileSync(manifest, "utf8")) as { version: string }).version;
  const bundle = path.join(packageDir, "llama", "gitRelease.bundle");
  if (!existsSync(bundle)) throw new BuildError("no_source", `${bundle} is missing: node-llama-cpp ${packageVersion} ships no llama.cpp source`);
  // A v2/v3 bundle starts with text: the signature line, then "<sha> <ref>" lines, then a blank line and the pack.
  const head = Buffer.alloc(4096);
  const fd = openSync(bundle, "r");
  const read = readSync(fd, head, 0, head.length, 0);
  closeSync(fd);
  const lines = head.subarray(0, read).toString("latin1").split("\n");
  if (!/^# v[23] git bundle/.test(lines[0])) throw new BuildError("no_source", `${bundle} is not a git bundle`);
  const refs = lines.slice(1, lines.indexOf("")).map((l) => /^([0-9a-f]{40}) (.+)$/.exec(l)).filter((m) => m !== null);
  const commit = (refs.find((m) => m[2] === "HEAD") ?? refs[0])?.[1];
  if (!commit) throw new BuildError("no_source", `cannot read the commit of ${bundle}`);
  return { packageDir, packageVersion, bundle, commit };
}

export class BuildError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "BuildError";
  }
}

export interface BuildInfo {
  commit: string;
  nodeLlamaCpp: string;
  builtAt: string;
}

export function readBuildInfo(dataDir: string): BuildInfo | null {
  try {
    return JSON.parse(readFileSync(path.join(llamaServerHome(dataDir), "build-info.json"), "utf8")) as BuildInfo;
  } catch {
    return null;
  }
}

function onPath(command: string, env: NodeJS.ProcessEnv): boolean {
  return (env.PATH ?? "").split(path.delimiter).some((dir) => {
    if (!dir) return false;
    try {
      accessSync(path.join(dir, command), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** The tools a build needs that are not on the PATH, each with what provides it. */
export function missingBuildTools(env: NodeJS.ProcessEnv = process.env): string[] {
  const missing: string[] = [];
  if (!onPath("git", env)) missing.push("git");
  if (!onPath("cmake", env)) missing.push("cmake");
  if (!["c++", "g++", "clang++"].some((c) => onPath(c, env)) && !(env.CXX && onPath(env.CXX, env))) missing.push("a C++ compiler (g++ or clang++)");
  if (!onPath("make", env) && !onPath("ninja", env)) missing.push("make (or ninja)");
  return missing;
}

export interface BuildOptions {
  dataDir: string;
  /** Parallel compile jobs (cmake --build -j). */
  jobs: number;
  /** Rebuild even when a build of the same commit is there. */
  force?: boolean;
  /** One line of progress at a time ("configuring", "building 45%"...). */
  progress(line: string): void;
  env?: NodeJS.ProcessEnv;
}

export interface BuildResult {
  binary: string;
  commit: string;
  /** False when a build of the same commit was already there and nothing ran. */
  built: boolean;
  seconds: number;
}

function run(command: string, args: string[], env: NodeJS.ProcessEnv, onLine?: (line: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env, stdio: ["ignore", "pipe", "pipe"] });
    let tail = "";
    let partial = "";
    const take = (chunk: string) => {
      tail = (tail + chunk).slice(-4000);
      partial += chunk;
      const lines = partial.split("\n");
      partial = lines.pop()!;
      for (const line of lines) onLine?.(line);
    };
    child.stdout.setEncoding("utf8").on("data", take);
    child.stderr.setEncoding("utf8").on("data", take);
    child.once("error", (err) => reject(new BuildError("build_failed", `${command}: ${err.message}`)));
    child.once("close", (code) => {
      if (code === 0) resolve();
      else reject(new BuildError("build_failed", `${command} ${args.slice(0, 2).join(" ")} failed (exit ${code}):\n${tail.trim()}`));
    });
  });
}

/**
 * Builds llama-server (CPU, GGML_NATIVE: tuned for this machine's CPU; Release) from node-llama-cpp's bundle into
 * the data dir. Idempotent: a finished build of the same commit is kept unless `force`. build-info.json is written
 * last, so an interrupted build is never taken for a finished one.
 */
export async function buildLlamaServer(options: BuildOptions): Promise<BuildResult> {
  const started = Date.now();
  const env = options.env ?? process.env;
  const source = llamaCppSource();
  const home = llamaServerHome(options.dataDir);
  const binary = managedLlamaServerBinary(options.dataDir);
  const info = readBuildInfo(options.dataDir);
  if (!options.force && info?.commit === source.commit && builtLlamaServer(options.dataDir) && spawnSync(binary, ["--version"], { stdio: "ignore", timeout: 30_000 }).status === 0) {
    return { binary, commit: source.commit, built: false, seconds: 0 };
  }
  const missing = missingBuildTools(env);
  if (missing.length) {
    throw new BuildError(
      "missing_tools",
      `building llama-server needs ${missing.join(", ")}, not found on the PATH; install them (Debian/Ubuntu: apt-get install git cmake g++ make; macOS: xcode-select --install && brew install cmake) and run this again`,
    );
  }
  mkdirSync(home, { recursive: true });
  rmSync(path.join(home, "build-info.json"), { force: true });
  const src = path.join(home, "src");
  const head = spawnSync("git", ["-C", src, "rev-parse", "HEAD"], { env, encoding: "utf8" });
  if (head.status !== 0 || head.stdout.trim() !== source.commit) {
    options.progress(`cloning llama.cpp ${source.commit.slice(0, 12)} from node-llama-cpp ${source.packageVersion}'s source bundle`);
    rmSync(src, { recursive: true, force: true });
    rmSync(path.join(home, "build"), { recursive: true, force: true });
    await run("git", ["-c", "advice.detachedHead=false", "clone", "--quiet", source.bundle, src], env);
    await run("git", ["-C", src, "-c", "advice.detachedHead=false", "checkout", "--quiet", source.commit], env);
  }
  const build = path.join(home, "build");
  options.progress("configuring (cmake, Release, GGML_NATIVE=ON, CPU)");
  await run("cmake", ["-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=ON", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF"], env);
  options.progress(`compiling llama-server with ${options.jobs} job${options.jobs === 1 ? "" : "s"} (several minutes on 2 cores)`);
  // cmake's makefiles print "[ 45%] Building CXX object ...": one progress line per new percentage.
  let last = -1;
  await run("cmake", ["--build", build, "--config", "Release", "--target", "llama-server", "-j", String(options.jobs)], env, (line) => {
    const percent = /^\[\s*(\d+)%\]/.exec(line)?.[1];
    if (percent !== undefined && Number(percent) > last) {
      last = Number(percent);
      options.progress(`building ${percent}%`);
    }
  });
  if (spawnSync(binary, ["--version"], { stdio: "ignore", timeout: 30_000 }).status !== 0) {
    throw new BuildError("build_failed", `the build finished but ${binary} does not run`);
  }
  const written: BuildInfo = { commit: source.commit, nodeLlamaCpp: source.packageVersion, builtAt: new Date().toISOString() };
  writeFileSync(path.join(home, "build-info.json"), `${JSON.stringify(written, null, 2)}\n`);
  return { binary, commit: source.commit, built: true, seconds: Math.round((Date.now() - started) / 1000) };
}
