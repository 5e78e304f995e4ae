import assert from "node:assert/strict";
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { readPooling } from "../src/engines/onnx/onnx-encoder-engine.ts";

const modelsDir = path.resolve(import.meta.dirname, "../../shared/models");

function folder(files: Record<string, unknown>): string {
  const dir = mkdtempSync(path.join(tmpdir(), "pooling-"));
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    writeFileSync(path.join(dir, name), JSON.stringify(content));
  }
  return dir;
}

test("§4.3 embeddings pool as the sentence-transformers config says: mean, cls, via modules.json, default mean", () => {
  assert.equal(readPooling(path.join(modelsDir, "forged/bert-embed-tiny")), "mean");
  const dirs = [
    folder({ "1_Pooling/config.json": { pooling_mode_cls_token: true, pooling_mode_mean_tokens: false } }),
    folder({
      "modules.json": [
        { idx: 0, name: "0", path: "", type: "sentence_transformers.models.Transformer" },
        { idx: 1, name: "1", path: "custom_pool", type: "sentence_transformers.models.Pooling" },
      ],
      "custom_pool/config.json": { pooling_mode_cls_token: true },
    }),
    folder({}),
    folder({ "1_Pooling/config.json": { pooling_mode_max_tokens: true } }),
  ];
  try {
    assert.equal(readPooling(dirs[0]), "cls");
    assert.equal(readPooling(dirs[1]), "cls");
    assert.equal(readPooling(dirs[2]), "mean");
    assert.throws(() => readPooling(dirs[3]), /only mean and cls/);
  } finally {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }
});
