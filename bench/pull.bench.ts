import { randomBytes } from "node:crypto";
import { createWriteStream, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { HubClient } from "../src/catalog/pull/hub-client.ts";
import { pullHubRef } from "../src/catalog/pull/pull-model.ts";
import { startFakeHub } from "../harness/fake-hub.ts";
import { median, ratioRow, type BenchRow } from "./bench-row.ts";

const RUNS = 5;
const SIZE = 64 * 1024 * 1024;
const quiet = { start() {}, bytes() {}, done() {} };

/**
 * `modelgate pull` throughput against a plain fetch-to-file of the same bytes from the same local hub: what
 * resolve/HEAD, sha256 verification, fsync and the rename cost on top of moving the bytes.
 */
export default async function bench(): Promise<BenchRow[]> {
  const hub = await startFakeHub({ "bench/model-GGUF": { "model-Q8_0.gguf": randomBytes(SIZE) } });
  const client = new HubClient({ endpoint: hub.endpoint });
  const dir = mkdtempSync(path.join(tmpdir(), "mg-pull-bench-"));
  try {
    const meta = await client.fileMeta("bench/model-GGUF", "main", "model-Q8_0.gguf");
    const service: number[] = [];
    const raw: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const dataDir = path.join(dir, `s${i}`);
      let started = process.hrtime.bigint();
      await pullHubRef("hf:bench/model-GGUF:Q8_0", { dataDir, client, events: quiet, log: () => {} });
      service.push(SIZE / 1e6 / (Number(process.hrtime.bigint() - started) / 1e9));
      rmSync(dataDir, { recursive: true, force: true });

      started = process.hrtime.bigint();
      const res = await fetch(meta.url);
      await pipeline(res.body as unknown as NodeJS.ReadableStream, createWriteStream(path.join(dir, `raw${i}`)) as Writable);
      raw.push(SIZE / 1e6 / (Number(process.hrtime.bigint() - started) / 1e9));
      rmSync(path.join(dir, `raw${i}`), { force: true });
    }
    const s = median(service);
    const r = median(raw);
    return [ratioRow({ item: "pull 64 MB GGUF (local hub), sha256 verified", service: s, raw: r, unit: "MB/s", target: ">= 0.7x plain fetch" })];
  } finally {
    await hub.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
