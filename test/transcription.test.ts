import assert from "node:assert/strict";
import { readFileSync, writeFileSync, createReadStream } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { toFile, APIError } from "openai";
import { modelsDir, startServer, tempDir, type TestServer } from "../harness/server.ts";
import { repeatedJfk } from "../harness/audio.ts";
import { until } from "./helpers/wait-for.ts";

/**
 * §4.4 / §2.6 through the real server and the official openai client, on the scripted whisper
 * (forged/whisper-scripted/scripted.json) and the real Silero VAD.
 */
const scripted = JSON.parse(readFileSync(path.join(modelsDir, "forged/whisper-scripted/scripted.json"), "utf8")) as {
  transcribe: { text: string; chunks: { timestamp: [number, number]; text: string }[] };
};
const scriptText = scripted.transcribe.text.trim();
const scriptSegments = scripted.transcribe.chunks.map((c, id) => ({ id, start: c.timestamp[0], end: c.timestamp[1], text: c.text }));
const formats = ["jfk.wav", "jfk.mp3", "jfk.m4a", "jfk.webm", "jfk.ogg", "jfk.flac", "jfk-44k-stereo.wav"];

let srv: TestServer;
let key: string;
let dir: string;

before(async () => {
  dir = tempDir("transcription-test-");
  srv = await startServer({
    plans: {
      small: { maxUploadBytes: 100_000 },
      tiny: { maxUploadBytes: 40_000 },
      notrans: { endpoints: ["models", "chat"] },
    },
    models: [
      { id: "whisper", engine: "onnx", source: path.join(modelsDir, "forged/whisper-scripted"), capabilities: ["transcriptions"], threads: 1, parallel: 2 },
      { id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 128, threads: 1, load: "lazy" },
    ],
  });
  key = (await srv.createKey()).key;
});

after(async () => {
  await srv?.close();
});

interface Verbose {
  task: string;
  language: string;
  duration: number;
  text: string;
  segments: { id: number; start: number; end: number; text: string }[];
}

interface ErrorBody {
  error: { message: string; type: string; code: string; param: string | null };
}

const post = (form: FormData, apiKey = key) => srv.post("/v1/audio/transcriptions", form, { key: apiKey });

function form(fields: Record<string, string>, file?: { bytes: Uint8Array; name: string } | null): FormData {
  const f = new FormData();
  if (file) f.append("file", new Blob([new Uint8Array(file.bytes)]), file.name);
  for (const [k, v] of Object.entries(fields)) f.append(k, v);
  return f;
}


const jfk = (name = "jfk.wav") => ({ bytes: readFileSync(path.join(modelsDir, name)), name });

async function expectError(res: Response, status: number, code: string, param: string | null, message?: RegExp): Promise<ErrorBody> {
  const text = await res.text();
  assert.equal(res.status, status, text);
  const body = JSON.parse(text) as ErrorBody;
  assert.equal(body.error.code, code, text);
  assert.equal(body.error.param, param, text);
  if (message) assert.match(body.error.message, message);
  return body;
}

for (const name of formats) {
  test(`§4.4 ${name} decodes in-process and transcribes in json, text and verbose_json`, async () => {
    const client = srv.openai(key);
    const bytes = readFileSync(path.join(modelsDir, name));
    const json = await client.audio.transcriptions.create({ model: "whisper", file: await toFile(bytes, name) });
    assert.deepEqual(json, { text: scriptText });

    const text = await client.audio.transcriptions.create({ model: "whisper", file: await toFile(bytes, name), response_format: "text" });
    assert.equal(text, scriptText);

    const verbose = (await client.audio.transcriptions.create({
      model: "whisper",
      file: await toFile(bytes, name),
      response_format: "verbose_json",
      language: "en",
    })) as unknown as Verbose;
    assert.equal(verbose.task, "transcribe");
    assert.equal(verbose.language, "english");
    assert.ok(Math.abs(verbose.duration - 11) < 0.01, `duration ${verbose.duration}`);
    assert.equal(verbose.text, scriptText);
    assert.deepEqual(verbose.segments, scriptSegments);
  });
}

test("§2.6 text format is a text/plain body", async () => {
  const res = await post(form({ model: "whisper", response_format: "text" }, jfk()));
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type") ?? "", /^text\/plain/);
  assert.equal(await res.text(), scriptText);
});

test("§4.4 language omitted is detected on the first window (scripted model: german)", async () => {
  const client = srv.openai(key);
  const file = createReadStream(path.join(modelsDir, "jfk.mp3"));
  const verbose = (await client.audio.transcriptions.create({ model: "whisper", file, response_format: "verbose_json" })) as unknown as Verbose;
  assert.equal(verbose.language, "german");
});

test("§4.4 a given language is forced", async () => {
  const client = srv.openai(key);
  for (const [code, name] of [["fr", "french"], ["de", "german"], ["en", "english"]]) {
    const verbose = (await client.audio.transcriptions.create({
      model: "whisper",
      file: await toFile(jfk().bytes, "jfk.wav"),
      response_format: "verbose_json",
      language: code,
    })) as unknown as Verbose;
    assert.equal(verbose.language, name);
  }
});

test("§4.4 prompt reaches whisper as previous text (the script starts later)", async () => {
  const client = srv.openai(key);
  const verbose = (await client.audio.transcriptions.create({
    model: "whisper",
    file: await toFile(jfk().bytes, "jfk.wav"),
    response_format: "verbose_json",
    prompt: "Hello there my friend",
    language: "en",
  })) as unknown as Verbose;
  // Four prompt tokens: the scripted decoder skips the first four words of its script.
  assert.equal(verbose.segments[0].text, " Americans,");
  assert.deepEqual(verbose.segments.slice(1), scriptSegments.slice(1));
});

test("§4.4 jfk.wav + 5 s silence, 8 times: 8 VAD windows, 3 scripted segments each on the original timeline", async () => {
  const file = path.join(dir, "jfk-x8.wav");
  writeFileSync(file, repeatedJfk(8, 5));
  const unit = 11 + 5;

  const client = srv.openai(key);
  const verbose = (await client.audio.transcriptions.create({ model: "whisper", file: createReadStream(file), response_format: "verbose_json" })) as unknown as Verbose;
  assert.equal(verbose.language, "german");
  assert.equal(verbose.duration, 8 * unit);
  assert.equal(verbose.segments.length, 24);
  assert.equal(verbose.text, Array.from({ length: 8 }, () => scriptText).join(" "));
  for (let w = 0; w < 8; w++) {
    const triple = verbose.segments.slice(3 * w, 3 * w + 3);
    const start = triple[0].start;
    // The window starts inside the silence before this copy of the speech (or at 0), never inside speech.
    assert.ok(start <= w * unit + 0.5 && start >= (w === 0 ? 0 : w * unit - 5), `window ${w} starts at ${start}`);
    triple.forEach((seg, i) => {
      assert.equal(seg.id, 3 * w + i);
      assert.equal(seg.text, scriptSegments[i].text);
      assert.ok(Math.abs(seg.start - (start + scriptSegments[i].start)) < 0.011, JSON.stringify(seg));
      assert.ok(Math.abs(seg.end - (start + scriptSegments[i].end)) < 0.011, JSON.stringify(seg));
    });
  }
  for (let i = 1; i < verbose.segments.length; i++) assert.ok(verbose.segments[i].start >= verbose.segments[i - 1].end);
  assert.ok(verbose.segments.at(-1)!.end <= verbose.duration);
});

test("§4.4 the event loop stays free: GET /v1/models answers in < 50 ms during a long transcription", async () => {
  const running = post(form({ model: "whisper" }, { bytes: repeatedJfk(10, 5), name: "long.wav" }));
  let done = false;
  void running.finally(() => (done = true));
  const timings: number[] = [];
  const busy = () => {
    const { preparing, active } = srv.server.ctx.catalog.get("whisper").stats();
    return preparing + active > 0;
  };
  await until(() => done || busy(), "the transcription to be decoding or running", 10_000, 10);
  while (!done && timings.length < 40) {
    const t = performance.now();
    const res = await srv.fetch(`${srv.baseURL}/models`, { headers: { authorization: `Bearer ${key}` } });
    await res.json();
    timings.push(performance.now() - t);
    await new Promise((r) => setTimeout(r, 50));
  }
  const res = await running;
  assert.equal(res.status, 200);
  assert.ok(timings.length >= 3, `only ${timings.length} probes ran during the transcription`);
  timings.sort((a, b) => a - b);
  const median = timings[Math.floor(timings.length / 2)];
  const detail = timings.map((t) => t.toFixed(0)).join(",");
  // The median is what the bound is about; on this shared 2-core box single probes can wait for a CPU, but
  // inference on the event loop would stall every probe for seconds (one window takes ~1 s).
  assert.ok(median < 50, `GET /v1/models median ${median.toFixed(1)} ms during transcription: ${detail}`);
  assert.ok(timings.at(-1)! < 1000, `a probe waited ${timings.at(-1)!.toFixed(0)} ms: ${detail}`);
});

test("§7 missing file is 400 invalid_parameter param=file", async () => {
  await expectError(await post(form({ model: "whisper" })), 400, "invalid_parameter", "file", /required/);
});

test("§7 empty file is 400 param=file saying it is empty", async () => {
  await expectError(await post(form({ model: "whisper" }, { bytes: new Uint8Array(0), name: "a.wav" })), 400, "invalid_parameter", "file", /empty/);
});

test("§7 unknown format is 400 param=file saying the format is not recognised", async () => {
  const res = await post(form({ model: "whisper" }, { bytes: Buffer.from("this is not audio at all, just text"), name: "a.mp3" }));
  const body = await expectError(res, 400, "invalid_parameter", "file", /not in a recognised audio format/);
  assert.equal(body.error.type, "invalid_request_error");
});

for (const name of ["jfk.wav", "jfk.mp3", "jfk.m4a", "jfk.webm", "jfk.ogg", "jfk.flac"]) {
  test(`§7 truncated ${name} is 400 param=file saying it is truncated`, async () => {
    const bytes = readFileSync(path.join(modelsDir, name));
    const res = await post(form({ model: "whisper" }, { bytes: bytes.subarray(0, Math.floor(bytes.length / 2)), name }));
    await expectError(res, 400, "invalid_parameter", "file", /truncated/);
  });
}

test("§7 undecodable data in a known container is 400 param=file, never 500", async () => {
  const wav = readFileSync(path.join(modelsDir, "jfk.wav"));
  const broken = Buffer.from(wav.subarray(0, 44));
  broken.writeUInt16LE(99, 20); // unknown WAV codec id
  const res = await post(form({ model: "whisper" }, { bytes: Buffer.concat([broken, wav.subarray(44)]), name: "x.wav" }));
  await expectError(res, 400, "invalid_parameter", "file");
  const flac = Buffer.from(readFileSync(path.join(modelsDir, "jfk.flac")));
  for (let i = 8192; i < flac.length; i += 97) flac[i] ^= 0x5a;
  const res2 = await post(form({ model: "whisper" }, { bytes: flac, name: "x.flac" }));
  assert.notEqual(res2.status, 500, await res2.clone().text());
  if (res2.status !== 200) await expectError(res2, 400, "invalid_parameter", "file");
});

test("§7 missing model is 400 param=model; unknown model is 404 model_not_found", async () => {
  await expectError(await post(form({}, jfk())), 400, "invalid_parameter", "model");
  await expectError(await post(form({ model: "nope" }, jfk())), 404, "model_not_found", "model");
});

test("§7 a chat model is 400 invalid_parameter param=model", async () => {
  await expectError(await post(form({ model: "stories" }, jfk())), 400, "invalid_parameter", "model");
});

test("§5 a plan without transcriptions is 403 model_not_in_plan param=model", async () => {
  const other = (await srv.createKey({ plan: "notrans" })).key;
  await expectError(await post(form({ model: "whisper" }, jfk()), other), 403, "model_not_in_plan", "model");
});

test("§4.4 srt and vtt are 400 param=response_format; unknown formats too", async () => {
  for (const f of ["srt", "vtt", "xml"]) {
    await expectError(await post(form({ model: "whisper", response_format: f }, jfk())), 400, "invalid_parameter", "response_format");
  }
});

test("§8 temperature outside 0..1 is 400 param=temperature; inside is accepted", async () => {
  for (const t of ["1.5", "-0.1", "hot"]) {
    await expectError(await post(form({ model: "whisper", temperature: t }, jfk())), 400, "invalid_parameter", "temperature");
  }
  const ok = await post(form({ model: "whisper", temperature: "1" }, jfk()));
  assert.equal(ok.status, 200, await ok.clone().text());
});

test("§4.4 an unknown language code is 400 param=language", async () => {
  for (const l of ["xx", "english", "e"]) {
    await expectError(await post(form({ model: "whisper", language: l }, jfk())), 400, "invalid_parameter", "language");
  }
});

test("decisions.md timestamp_granularities containing word is 400; segment is accepted", async () => {
  const client = srv.openai(key);
  await assert.rejects(
    client.audio.transcriptions.create({
      model: "whisper",
      file: await toFile(jfk().bytes, "jfk.wav"),
      response_format: "verbose_json",
      timestamp_granularities: ["word", "segment"],
    }),
    (err: unknown) => err instanceof APIError && err.status === 400 && (err.error as ErrorBody["error"]).param === "timestamp_granularities",
  );
  const ok = (await client.audio.transcriptions.create({
    model: "whisper",
    file: await toFile(jfk().bytes, "jfk.wav"),
    response_format: "verbose_json",
    timestamp_granularities: ["segment"],
  })) as unknown as Verbose;
  assert.equal(ok.segments?.length, 3);
});

test("§8 an upload over the plan's maxUploadBytes is 413 request_too_large param=null", async () => {
  const tiny = (await srv.createKey({ plan: "tiny" })).key;
  const res = await post(form({ model: "whisper" }, jfk("jfk.m4a")), tiny);
  await expectError(res, 413, "request_too_large", null);
  const small = (await srv.createKey({ plan: "small" })).key;
  // Under the limit the same plan works.
  const ok = await post(form({ model: "whisper" }, jfk("jfk.ogg")), small);
  assert.equal(ok.status, 200, await ok.clone().text());
});

// The upload stays small (46 kB) so it is written whole before the server answers: a server that refuses an
// upload and closes the connection races a client still writing, which then sees a reset instead of the 413.
test("§8 413 also through the openai client", async () => {
  const tiny = (await srv.createKey({ plan: "tiny" })).key;
  const client = srv.openai(tiny);
  await assert.rejects(
    client.audio.transcriptions.create({ model: "whisper", file: createReadStream(path.join(modelsDir, "jfk.ogg")) }),
    (err: unknown) => err instanceof APIError && err.status === 413 && (err.error as ErrorBody["error"]).code === "request_too_large",
  );
});

test("§7 a JSON body instead of multipart is 400 param=file", async () => {
  const res = await srv.post("/v1/audio/transcriptions", { model: "whisper" }, { key: key });
  await expectError(res, 400, "invalid_parameter", "file");
});

test("§8 a chunked upload (no Content-Length) over the limit is 413 while streaming", async () => {
  const small = (await srv.createKey({ plan: "small" })).key;
  const boundary = "----modelgate-test-boundary";
  const head = Buffer.from(
    `--${boundary}\r\ncontent-disposition: form-data; name="model"\r\n\r\nwhisper\r\n` +
      `--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="big.wav"\r\ncontent-type: audio/wav\r\n\r\n`,
  );
  const wav = readFileSync(path.join(modelsDir, "jfk.wav"));
  const chunks = [head, ...Array.from({ length: 3 }, (_, i) => wav.subarray(i * 50_000, (i + 1) * 50_000)), Buffer.from(`\r\n--${boundary}--\r\n`)];
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      const next = chunks.shift();
      if (!next) return controller.close();
      controller.enqueue(next);
    },
  });
  const res = await srv.fetch(`${srv.baseURL}/audio/transcriptions`, {
    method: "POST",
    headers: { authorization: `Bearer ${small}`, "content-type": `multipart/form-data; boundary=${boundary}` },
    body,
    duplex: "half",
  } as RequestInit);
  await expectError(res, 413, "request_too_large", null);
});

test("§7 two files, or a file under another name, is 400 param naming the part", async () => {
  const two = form({ model: "whisper" }, jfk("jfk.ogg"));
  two.append("file", new Blob([new Uint8Array(jfk("jfk.ogg").bytes)]), "second.ogg");
  await expectError(await post(two), 400, "invalid_parameter", "file");
  const other = new FormData();
  other.append("model", "whisper");
  other.append("audio", new Blob([new Uint8Array(jfk("jfk.ogg").bytes)]), "jfk.ogg");
  await expectError(await post(other), 400, "invalid_parameter", "audio");
});
