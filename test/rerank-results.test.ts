import assert from "node:assert/strict";
import { test } from "node:test";
import { rankResults } from "../src/features/rerank/rerank.service.ts";

test("§4.5 results are ordered by relevance, highest first, with indices into the request", () => {
  assert.deepEqual(rankResults([0.1, 0.9, 0.5], undefined), [
    { index: 1, relevance_score: 0.9 },
    { index: 2, relevance_score: 0.5 },
    { index: 0, relevance_score: 0.1 },
  ]);
});

test("§4.5 top_n keeps only the highest-scoring documents; a top_n above the count returns all", () => {
  assert.deepEqual(rankResults([0.1, 0.9, 0.5], 1), [{ index: 1, relevance_score: 0.9 }]);
  assert.equal(rankResults([0.1, 0.9, 0.5], 10).length, 3);
});

test("equal scores keep request order", () => {
  assert.deepEqual(
    rankResults([0.5, 0.7, 0.5, 0.5], undefined).map((r) => r.index),
    [1, 0, 2, 3],
  );
});
