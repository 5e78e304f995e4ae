import { test, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, rmSync, statSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { cliPath, modelsDir, runCli, tempDir, writeConfig } from "../harness/server.ts";
import { folderFiles, startFakeHub } from "../harness/fake-hub.ts";

const stories = readFileSync(path.join(modelsDir, "stories260K.gguf"));
const embedFolder = folderFiles(path.join(modelsDir, "forged/bert-embed-tiny"));

const hub = await startFakeHub({
  "karpathy/tinyllamas": { "stories260K.gguf": stories, "README.md": Buffer.from("# tinyllamas\n") },
  "test-org/stories-GGUF": {
    "stories-Q4_K.gguf": Buffer.concat([stories, Buffer.from("q4_k")]),
    "stories-Q4_K_M.gguf": stories,
    "stories-Q8_0.gguf": Buffer.concat([stories, Buffer.from("q8_0")]),
    "README.md": Buffer.from("# stories\n"),
  },
  "forged/bert-embed-tiny": {
    ...embedFolder,
    "onnx/model_quantized.onnx": Buffer.from("pretend q8 weights"),
    "onnx/model_fp16.onnx": Buffer.from("pretend fp16 weights"),
    "model.safetensors": Buffer.from("pytorch weights transformers.js never reads"),
    "README.md": Buffer.from("# bert-embed-tiny\n"),
    ".gitattributes": Buffer.from("*.onnx filter=lfs\n"),
  },
  "forged/whisper-scripted": folderFiles(path.join(modelsDir, "forged/whisper-scripted")),
  "onnx-community/silero-vad": { "onnx/model.onnx": path.join(modelsDir, "silero_vad.onnx"), "config.json": Buffer.from("{}") },
});
after(() => hub.close());

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex");
const env = (extra: NodeJS.ProcessEnv = {}) => ({ HF_ENDPOINT: hub.endpoint, HF_TOKEN: "", ...extra });

function pullJson(stdout: string): { pulled: { path: string; files: { name: string; verified: string; resumedFrom: number; downloaded: boolean }[]; dtype: string | null }[] } {
  return JSON.parse(stdout.trim().split("\n").pop()!);
}

test("issue 9.1 pull hf:org/repo:file.gguf lands the file in <dataDir>/models/org/repo, verified by sha256, with progress lines", async () => {
  const dataDir = tempDir();
  try {
    const { code, stdout, stderr } = await runCli(["pull", "hf:karpathy/tinyllamas:stories260K.gguf", "--data-dir", dataDir, "--json"], env());
    assert.equal(code, 0, stderr);
    const target = path.join(dataDir, "models/karpathy/tinyllamas/stories260K.gguf");
    const result = pullJson(stdout);
    assert.equal(result.pulled[0].path, target);
    assert.equal(result.pulled[0].files[0].verified, "sha256");
    assert.equal(sha256(readFileSync(target)), sha256(stories));
    assert.ok(!existsSync(`${target}.partial`));
    // Not a TTY here: plain progress lines on stderr.
    assert.match(stderr, /pulling karpathy\/tinyllamas\/stories260K\.gguf: 1\.2 MB/);
    assert.match(stderr, /pulled karpathy\/tinyllamas\/stories260K\.gguf: 1\.2 MB \/ 1\.2 MB in/);
    // The resolve call answered 302 and the bytes came from the CDN-like path.
    assert.ok(hub.requests.some((r) => r.method === "HEAD" && r.path === "/karpathy/tinyllamas/resolve/main/stories260K.gguf"));
    assert.ok(hub.requests.some((r) => r.method === "GET" && r.path.startsWith(`/cdn-lfs/repos/karpathy/tinyllamas/${sha256(stories)}?`)));

    // A second pull finds the verified copy and downloads nothing.
    const again = await runCli(["pull", "hf:karpathy/tinyllamas:stories260K.gguf", "--data-dir", dataDir], env());
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /already present/);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test("issue 9.1 pull hf:org/repo:QUANT picks the GGUF whose name carries exactly that quant", async () => {
  const dataDir = tempDir();
  try {
    const { code, stdout, stderr } = await runCli(["pull", "hf:test-org/stories-GGUF:Q4_K_M", "--data-dir", dataDir, "--json"], env());
    assert.equal(code, 0, stderr);
    assert.equal(pullJson(stdout).pulled[0].path, path.join(dataDir, "models/test-org/stories-GGUF/stories-Q4_K_M.gguf"));
    assert.equal(sha256(readFileSync(path.join(dataDir, "models/test-org/stories-GGUF/stories-Q4_K_M.gguf"))), sha256(stories));

    const missing = await runCli(["pull", "hf:test-org/stories-GGUF:Q5_K_S", "--data-dir", dataDir, "--json"], env());
    assert.equal(missing.code, 1);
    const error = JSON.parse(missing.stdout).error;
    assert.equal(error.code, "not_pullable");
    assert.match(error.message, /no GGUF for quant Q5_K_S; available: stories-Q4_K\.gguf, stories-Q4_K_M\.gguf, stories-Q8_0\.gguf/);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test("issue 9.1 pull hf:org/repo fetches a transformers.js ONNX layout: configs + the weights of the chosen dtype only", async () => {
  const dataDir = tempDir();
  try {
    const repoDir = path.join(dataDir, "models/forged/bert-embed-tiny");
    const fp32 = await runCli(["pull", "hf:forged/bert-embed-tiny", "--data-dir", dataDir, "--json"], env());
    assert.equal(fp32.code, 0, fp32.stderr);
    const result = pullJson(fp32.stdout).pulled[0];
    assert.equal(result.dtype, "fp32");
    assert.equal(result.path, repoDir);
    const names = result.files.map((f) => f.name.replace("forged/bert-embed-tiny/", "")).sort();
    assert.deepEqual(names, [
      "1_Pooling/config.json", "config.json", "modules.json", "onnx/model.onnx", "sentence_bert_config.json",
      "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
    ]);
    // LFS weights verify by sha256; regular files by their git blob sha1 (the hub's ETag).
    assert.equal(result.files.find((f) => f.name.endsWith("onnx/model.onnx"))!.verified, "sha256");
    assert.equal(result.files.find((f) => f.name.endsWith("/tokenizer.json"))!.verified, "git-sha1");
    for (const [name, content] of Object.entries(embedFolder)) {
      assert.equal(sha256(readFileSync(path.join(repoDir, name))), sha256(content as Buffer), name);
    }
    assert.ok(!existsSync(path.join(repoDir, "model.safetensors")));
    assert.ok(!existsSync(path.join(repoDir, "onnx/model_quantized.onnx")));
    assert.ok(!existsSync(path.join(dataDir, "models/.partial/forged/bert-embed-tiny")), "the staging folder is gone");

    const q8 = await runCli(["pull", "hf:forged/bert-embed-tiny", "--dtype", "q8", "--data-dir", dataDir, "--json"], env());
    assert.equal(q8.code, 0, q8.stderr);
    const q8Result = pullJson(q8.stdout).pulled[0];
    assert.equal(q8Result.dtype, "q8");
    assert.deepEqual(q8Result.files.filter((f) => f.downloaded).map((f) => f.name), ["forged/bert-embed-tiny/onnx/model_quantized.onnx"]);
    assert.equal(readFileSync(path.join(repoDir, "onnx/model_quantized.onnx"), "utf8"), "pretend q8 weights");

    const bad = await runCli(["pull", "hf:forged/bert-embed-tiny", "--dtype", "q4", "--data-dir", dataDir, "--json"], env());
    assert.equal(bad.code, 1);
    assert.match(JSON.parse(bad.stdout).error.message, /no q4 weights; available dtypes: fp16, fp32, q8/);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test("issue 9.1 a killed pull resumes with a Range request and the bytes verify", async () => {
  const dataDir = tempDir();
  const file = "stories260K.gguf";
  const stallAt = 400_000;
  hub.behaviour.stallAt = { file, byte: stallAt };
  try {
    const target = path.join(dataDir, "models/karpathy/tinyllamas", file);
    const child = spawn(process.execPath, [cliPath, "pull", `hf:karpathy/tinyllamas:${file}`, "--data-dir", dataDir], {
      env: { ...process.env, ...env() },
      stdio: ["ignore", "ignore", "ignore"],
    });
    await hub.stalled;
    // The CLI has written everything it received to <file>.partial; kill it hard mid-download.
    const deadline = Date.now() + 10_000;
    while ((statSync(`${target}.partial`, { throwIfNoEntry: false })?.size ?? 0) < stallAt && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    // A second pull of the same file meanwhile refuses to interleave its bytes with the first one's.
    const second = await runCli(["pull", `hf:karpathy/tinyllamas:${file}`, "--data-dir", dataDir, "--json"], env());
    assert.equal(second.code, 1);
    assert.match(JSON.parse(second.stdout).error.message, new RegExp(`another pull \\(pid ${child.pid}\\) is downloading this file`));

    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    await exited;
    assert.equal(statSync(`${target}.partial`).size, stallAt);
    assert.ok(!existsSync(target), "a half-written file never sits where the model is expected");

    hub.behaviour.stallAt = null;
    const before = hub.requests.length;
    const { code, stdout, stderr } = await runCli(["pull", `hf:karpathy/tinyllamas:${file}`, "--data-dir", dataDir, "--json"], env());
    assert.equal(code, 0, stderr);
    const ranged = hub.requests.slice(before).filter((r) => r.path.startsWith("/cdn-lfs/"));
    assert.deepEqual(ranged.map((r) => r.range), [`bytes=${stallAt}-`]);
    assert.match(stderr, /resuming at 400 KB/);
    const pulled = pullJson(stdout).pulled[0].files[0];
    assert.equal(pulled.resumedFrom, stallAt);
    assert.equal(pulled.verified, "sha256");
    assert.equal(sha256(readFileSync(target)), sha256(stories));
    assert.ok(!existsSync(`${target}.partial`));
    assert.ok(!existsSync(`${target}.partial.lock`), "the killed pull's stale lock was taken over and released");
  } finally {
    hub.behaviour.stallAt = null;
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test("issue 9.1 an interrupted ONNX layout pull leaves nothing at the model's folder until every file is verified", async () => {
  const dataDir = tempDir();
  hub.behaviour.stallAt = { file: "onnx/model.onnx", byte: 100_000 };
  try {
    const repoDir = path.join(dataDir, "models/forged/bert-embed-tiny");
    const child = spawn(process.execPath, [cliPath, "pull", "hf:forged/bert-embed-tiny", "--data-dir", dataDir], {
      env: { ...process.env, ...env() },
      stdio: ["ignore", "ignore", "ignore"],
    });
    const staged = path.join(dataDir, "models/.partial/forged/bert-embed-tiny/onnx/model.onnx.partial");
    const deadline = Date.now() + 20_000;
    while ((statSync(staged, { throwIfNoEntry: false })?.size ?? 0) < 100_000 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    await exited;
    assert.equal(statSync(staged).size, 100_000);
    assert.ok(!existsSync(repoDir), "no half-pulled folder where the model is expected");

    hub.behaviour.stallAt = null;
    const before = hub.requests.length;
    const resumed = await runCli(["pull", "hf:forged/bert-embed-tiny", "--data-dir", dataDir, "--json"], env());
    assert.equal(resumed.code, 0, resumed.stderr);
    assert.ok(hub.requests.slice(before).some((r) => r.range === "bytes=100000-"));
    assert.equal(sha256(readFileSync(path.join(repoDir, "onnx/model.onnx"))), sha256(embedFolder["onnx/model.onnx"] as Buffer));
    assert.ok(!existsSync(path.join(dataDir, "models/.partial/forged/bert-embed-tiny")));
  } finally {
    hub.behaviour.stallAt = null;
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test("issue 9.1 a corrupted download fails its sha256 check: exit 1, clear message, nothing left in place", async () => {
  const dataDir = tempDir();
  hub.behaviour.corrupt = "stories260K.gguf";
  try {
    const { code, stdout } = await runCli(["pull", "hf:karpathy/tinyllamas:stories260K.gguf", "--data-dir", dataDir, "--json"], env());
    assert.equal(code, 1);
    const error = JSON.parse(stdout).error;
    assert.equal(error.code, "verify_failed");
    assert.match(error.message, new RegExp(`sha256 mismatch \\(expected ${sha256(stories)}, got [0-9a-f]{64}\\)`));
    const target = path.join(dataDir, "models/karpathy/tinyllamas/stories260K.gguf");
    assert.ok(!existsSync(target));
    assert.ok(!existsSync(`${target}.partial`));

    const text = await runCli(["pull", "hf:karpathy/tinyllamas:stories260K.gguf", "--data-dir", dataDir], env());
    assert.equal(text.code, 1);
    assert.match(text.stderr, /modelgate: pull hf:karpathy\/tinyllamas:stories260K\.gguf failed: .*sha256 mismatch/);
  } finally {
    hub.behaviour.corrupt = null;
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test("issue 9.1 HF_TOKEN goes to the hub as a Bearer token (never to the CDN); without it a gated repo fails clearly", async () => {
  const dataDir = tempDir();
  hub.behaviour.requireToken = "hf_test_token_123";
  try {
    const denied = await runCli(["pull", "hf:karpathy/tinyllamas:stories260K.gguf", "--data-dir", dataDir, "--json"], env());
    assert.equal(denied.code, 1);
    const error = JSON.parse(denied.stdout).error;
    assert.equal(error.code, "hub_unauthorized");
    assert.match(error.message, /set HF_TOKEN/);

    const before = hub.requests.length;
    const ok = await runCli(["pull", "hf:karpathy/tinyllamas:stories260K.gguf", "--data-dir", dataDir, "--json"], env({ HF_TOKEN: "hf_test_token_123" }));
    assert.equal(ok.code, 0, ok.stderr);
    const requests = hub.requests.slice(before);
    assert.ok(requests.filter((r) => !r.path.startsWith("/cdn-lfs/")).every((r) => r.authorization === "Bearer hf_test_token_123"));
    assert.ok(requests.filter((r) => r.path.startsWith("/cdn-lfs/")).every((r) => r.authorization === null));
  } finally {
    hub.behaviour.requireToken = null;
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test("issue 9.1 failures give a clear message and a non-zero exit: unknown repo, unknown file, unreachable hub, bad ref", async () => {
  const dataDir = tempDir();
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const closedPort = (probe.address() as net.AddressInfo).port;
  await new Promise((resolve) => probe.close(resolve));
  try {
    const cases: [string[], NodeJS.ProcessEnv, string, RegExp][] = [
      [["pull", "hf:nobody/nothing"], env(), "hub_not_found", /repo nobody\/nothing@main: not found on http:\/\/127\.0\.0\.1:\d+ \(404\)/],
      [["pull", "hf:karpathy/tinyllamas:stories15M.gguf"], env(), "not_pullable", /has no file stories15M\.gguf; GGUF files: stories260K\.gguf/],
      [["pull", "hf:karpathy/tinyllamas:stories260K.gguf"], env({ HF_ENDPOINT: `http://127.0.0.1:${closedPort}` }), "hub_unreachable", /cannot reach http:\/\/127\.0\.0\.1:\d+: [A-Z_]+/],
      [["pull", "not-a-ref"], env(), "invalid_ref", /neither a hub ref .* nor a configured model id/],
    ];
    for (const [args, cliEnv, code, message] of cases) {
      const result = await runCli([...args, "--data-dir", dataDir, "--json"], cliEnv);
      assert.equal(result.code, 1, args.join(" "));
      const error = JSON.parse(result.stdout).error;
      assert.equal(error.code, code, args.join(" "));
      assert.match(error.message, message);
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test("issue 9.2 `pull` with no ref fetches every missing configured model; `models list` shows state, size and capabilities", async () => {
  const dir = tempDir();
  try {
    const configFile = writeConfig(dir, {
      dataDir: "./data",
      models: [
        { id: "stories", engine: "llama", source: "hf:test-org/stories-GGUF:Q8_0", capabilities: ["chat"], threads: 1 },
        { id: "embed", engine: "onnx", source: "hf:forged/bert-embed-tiny", capabilities: ["embeddings"] },
        { id: "local", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"] },
        { id: "whisper", engine: "onnx", source: "hf:forged/whisper-scripted", capabilities: ["transcriptions"] },
      ],
    });
    const before = await runCli(["models", "list", "--config", configFile, "--json"], env());
    assert.equal(before.code, 0, before.stderr);
    const listed = JSON.parse(before.stdout).models as { id: string; state: string; sizeBytes: number | null; capabilities: string[]; engine: string; pullCommand: string | null }[];
    assert.deepEqual(listed.map((m) => [m.id, m.state]), [["stories", "missing"], ["embed", "missing"], ["local", "present"], ["whisper", "missing"]]);
    assert.equal(listed[0].pullCommand, "modelgate pull hf:test-org/stories-GGUF:Q8_0");
    assert.equal(listed[2].sizeBytes, stories.length);

    const pulled = await runCli(["pull", "--config", configFile], env());
    assert.equal(pulled.code, 0, pulled.stderr);
    assert.match(pulled.stdout, /stories: hf:test-org\/stories-GGUF:Q8_0: 1 of 1 files fetched/);
    assert.match(pulled.stdout, /embed: hf:forged\/bert-embed-tiny \[fp32\]: 9 of 9 files fetched/);
    assert.match(pulled.stdout, /whisper: hf:forged\/whisper-scripted \[fp32\]: 8 of 8 files fetched/);
    // The whisper engine's Silero VAD comes along, where the engine looks for it.
    assert.equal(sha256(readFileSync(path.join(dir, "data/models/onnx-community/silero-vad/onnx/model.onnx"))), sha256(readFileSync(path.join(modelsDir, "silero_vad.onnx"))));

    const afterList = await runCli(["models", "list", "--config", configFile], env());
    assert.equal(afterList.code, 0, afterList.stderr);
    assert.match(afterList.stdout, /^stories\s+llama\s+present\s+1\.2 MB\s+chat\s+hf:test-org\/stories-GGUF:Q8_0$/m);
    assert.match(afterList.stdout, /^embed\s+onnx\s+present\s+\d+(\.\d)? KB\s+embeddings\s+hf:forged\/bert-embed-tiny$/m);

    const nothing = await runCli(["pull", "--config", configFile], env());
    assert.equal(nothing.code, 0);
    assert.match(nothing.stdout, /every configured hub model is present/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});



test("issue 29.16 a hub mirror cannot write outside <dataDir>/models: a listed name with .. refuses the repo; refs with .., absolute paths or backslashes are refused", async () => {
  const dataDir = tempDir();
  const escape = `escape-${process.pid}-${Date.now()}`;
  const landings = [dataDir, path.dirname(dataDir), path.join(dataDir, "models")].flatMap((dir) => [path.join(dir, `${escape}.txt`), path.join(dir, `${escape}.gguf`)]);
  const hostile = await startFakeHub({ "forged/bert-embed-tiny": embedFolder, "karpathy/tinyllamas": { "stories260K.gguf": stories } });
  const hostileEnv = { HF_ENDPOINT: hostile.endpoint, HF_TOKEN: "" };
  const pull = async (ref: string) => {
    const result = await runCli(["pull", ref, "--data-dir", dataDir, "--json"], hostileEnv);
    assert.equal(result.code, 1, `${ref}: ${result.stdout}${result.stderr}`);
    return JSON.parse(result.stdout).error as { code: string; message: string };
  };
  try {
    // The external data of onnx/model.onnx, as the planner picks it, named to climb out of the staging folder.
    hostile.behaviour.hostile = { repo: "forged/bert-embed-tiny", name: `onnx/model.onnx_data/${"../".repeat(6)}${escape}.txt`, content: Buffer.from("written by the mirror") };
    let error = await pull("hf:forged/bert-embed-tiny");
    assert.equal(error.code, "hub_error");
    assert.match(error.message, /the hub lists the file name ".*\.\.\/.*", which has an empty, '\.' or '\.\.' segment; refusing to pull from it/);

    hostile.behaviour.hostile = { repo: "forged/bert-embed-tiny", name: `onnx\\..\\..\\${escape}.txt`, content: Buffer.from("written by the mirror") };
    assert.match((await pull("hf:forged/bert-embed-tiny")).message, /which has a backslash/);

    // A GGUF named by the ref itself: the mirror lists it, the ref climbs out of the repo's folder.
    hostile.behaviour.hostile = { repo: "karpathy/tinyllamas", name: `../../../${escape}.gguf`, content: Buffer.from("GGUF by the mirror") };
    error = await pull(`hf:karpathy/tinyllamas:../../../${escape}.gguf`);
    assert.equal(error.code, "not_pullable");
    assert.match(error.message, /the file "\.\.\/\.\.\/\.\.\/.*" has an empty, '\.' or '\.\.' segment: refusing to write it/);
    for (const ref of [`hf:karpathy/tinyllamas:/tmp/${escape}.gguf`, `hf:karpathy/tinyllamas:sub\\..\\${escape}.gguf`, "hf:karpathy/..:x.gguf"]) {
      assert.equal((await pull(ref)).code, "not_pullable", ref);
    }
    assert.deepEqual(landings.filter((file) => existsSync(file)), [], "nothing written outside the models folder");
    assert.ok(!existsSync(path.join(dataDir, "models/forged")) && !existsSync(path.join(dataDir, "models/karpathy")), "nothing of a refused repo kept");
  } finally {
    for (const file of landings) rmSync(file, { force: true });
    rmSync(dataDir, { recursive: true, force: true });
    await hostile.close();
  }
});
