// Issue 32: prices per million tokens and spend in exact integer micro-units, checked against hand-computed values.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { modelsDir, startServer, type TestServer } from "../harness/server.ts";
import { costMicro, formatMoney, parseMoney } from "../src/config/money.ts";

test("issue 32 money: amounts parse exactly into micro-units, costs round once (half up, or up for reservations)", () => {
  assert.equal(parseMoney(0.15, "x"), 150_000);
  assert.equal(parseMoney("0.000001", "x"), 1);
  assert.equal(parseMoney(2.5, "x"), 2_500_000);
  assert.equal(parseMoney(12, "x"), 12_000_000);
  // A float sum that is not what it looks like is refused, not rounded silently.
  assert.throws(() => parseMoney(0.1 + 0.2, "x"), /at most 6 decimals/);
  assert.throws(() => parseMoney("0.0000001", "x"), /at most 6 decimals/);
  // 7 prompt tokens at 0.15 per million and 13 completion tokens at 0.60 per million: 1.05 + 7.80 = 8.85 µ → 9 µ.
  const pricing = { input: 150_000, output: 600_000 };
  assert.equal(costMicro(pricing, 7, 13), 9);
  assert.equal(costMicro(pricing, 7, 13, "ceil"), 9);
  // 3 tokens at 0.50 per million: 1.5 µ → 2 (half up); 1 token: 0.5 µ → 1; 0.15 per million × 3: 0.45 µ → 0, ceil 1.
  assert.equal(costMicro({ input: 500_000, output: 0 }, 3, 0), 2);
  assert.equal(costMicro({ input: 500_000, output: 0 }, 1, 0), 1);
  assert.equal(costMicro(pricing, 3, 0), 0);
  assert.equal(costMicro(pricing, 3, 0, "ceil"), 1);
  // A million tokens at 2.50 and ten million at 10.00: 2.5 + 100 = 102.500000, exact.
  assert.equal(formatMoney(costMicro({ input: 2_500_000, output: 10_000_000 }, 1_000_000, 10_000_000)), "102.500000");
  // Past 2^53 in the intermediate product (9e15): BigInt keeps it exact.
  assert.equal(costMicro({ input: 999_999_999, output: 0 }, 9_000_000_000, 0), 8_999_999_991_000);
  assert.equal(formatMoney(9), "0.000009");
  assert.equal(costMicro(null, 1000, 1000), 0);
});

describe("issue 32 spend in usage reports", () => {
  let s: TestServer;
  const adminToken = randomBytes(32).toString("base64url");
  before(async () => {
    s = await startServer({
      adminToken,
      currency: "EUR",
      models: [{ id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, parallel: 1, threads: 1, pricing: { input: 0.15, output: "0.6" } }],
    });
  });
  after(() => s?.close());

  test("GET /admin/v1/usage and /usage/daily report each line's spend, exact, in the config's currency", async () => {
    const { key, accountId } = await s.createKey();
    let prompt = 0;
    let completion = 0;
    for (const maxTokens of [5, 9, 17]) {
      const res = await s.post("/v1/chat/completions", { model: "stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: maxTokens }, { key });
      const { usage } = (await res.json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
      prompt += usage.prompt_tokens;
      completion += usage.completion_tokens;
    }
    await s.server.ctx.usage.flush();
    // Hand-computed: prompt × 0.15 + completion × 0.60 micro-units, rounded half up once for the line.
    const tenths = prompt * 15 + completion * 60; // hundredths of a micro-unit
    const expected = Math.floor(tenths / 100) + (tenths % 100 >= 50 ? 1 : 0);
    for (const path of ["/admin/v1/usage", "/admin/v1/usage/daily"]) {
      const res = await s.get(`${path}?account=${accountId}`, { headers: { authorization: `Bearer ${adminToken}` } });
      assert.equal(res.status, 200);
      const [line] = ((await res.json()) as { data: { spendMicros: number; spend: string; currency: string; promptTokens: number }[] }).data;
      assert.equal(line.promptTokens, prompt);
      assert.equal(line.spendMicros, expected, `${path}: ${prompt} × 0.15 + ${completion} × 0.60`);
      assert.equal(line.spend, `0.${String(expected).padStart(6, "0")}`);
      assert.equal(line.currency, "EUR");
    }
  });
});
