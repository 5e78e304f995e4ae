// Issue 32: prices per million tokens and spend in exact integer micro-units, checked against hand-computed values.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { modelsDir, startServer, type TestServer } from "../harness/server.ts";
import { Writable } from "node:stream";
import { costMicro, formatMoney, parseMoney } from "../src/config/money.ts";
import { runCli, writeConfig } from "../harness/server.ts";
import { waitFor } from "./helpers/wait-for.ts";

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

describe("issue 32 budgets", () => {
  let s: TestServer;
  const lines: string[] = [];
  const adminToken = randomBytes(32).toString("base64url");
  const admin = { authorization: `Bearer ${adminToken}` };
  let raw: Record<string, unknown>;
  before(async () => {
    const stream = new Writable({
      write(chunk, _encoding, done) {
        lines.push(...String(chunk).split("\n").filter(Boolean));
        done();
      },
    });
    // One micro-unit a token, in and out: a budget of 0.000100 is 100 tokens.
    raw = {
      adminToken,
      models: [{ id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, parallel: 1, threads: 1, pricing: { input: 1, output: 1 } }],
      plans: { capped: { budget: { amount: "0.0001", period: "day" } } },
    };
    s = await startServer(raw, { logger: { level: "warn", stream } });
  });
  after(() => s?.close());

  const ask = (key: string, maxTokens: number) => s.post("/v1/chat/completions", { model: "stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: maxTokens }, { key });
  const used = async (res: Response) => ((await res.json()) as { usage: { prompt_tokens: number; total_tokens: number } }).usage;

  test("at the boundary: a request that may cost exactly what is left is admitted, one token more is 429 naming the budget", async () => {
    const { key, accountId } = await s.createKey({ plan: "capped" });
    const probe = await ask(key, 1);
    assert.equal(probe.status, 200);
    const first = await used(probe);
    const prompt = first.prompt_tokens;
    let spent = first.total_tokens;
    // What is left, exactly: 100 - spent micro-units; a reservation of prompt + max_tokens micro-units.
    const over = await ask(key, 100 - spent - prompt + 1);
    assert.equal(over.status, 429);
    const { error } = (await over.json()) as { error: { code: string; message: string } };
    assert.equal(error.code, "rate_limit_exceeded");
    assert.match(error.message, new RegExp(`The account's budget of 0\\.000100 USD per day has 0\\.0000${String(100 - spent).padStart(2, "0")} USD left, less than this request may cost .*; it resets at .*T00:00:00Z \\(00:00 UTC\\)\\.`));
    assert.ok(Number(over.headers.get("retry-after")) > 0);
    const exact = await ask(key, 100 - spent - prompt);
    assert.equal(exact.status, 200, "a reservation of exactly what is left fits");
    spent += (await used(exact)).total_tokens;
    // The gauge and the warning line once the account is past 80%.
    assert.ok(spent >= 80, `the account spent ${spent} of 100 (stories260K ran to max_tokens)`);
    {
      await ask(key, 1);
      assert.ok(lines.some((l) => l.includes(`account ${accountId} has used`) && l.includes("budget of 0.000100 USD")), "the 80% warning was logged");
      const metrics = await (await s.get("/metrics", { headers: admin })).text();
      assert.match(metrics, new RegExp(`modelgate_budget_used_ratio\\{account="${accountId}"\\} 0\\.[89]|modelgate_budget_used_ratio\\{account="${accountId}"\\} 1`));
    }
  });

  test("an account's own budget (admin API and CLI) overrides its plan's, is audited, and is refused by name", async () => {
    const { key, accountId } = await s.createKey({ plan: "capped" });
    const patched = await s.post(`/admin/v1/accounts/${accountId}`, { budget: { amount: "0.00001", period: "month" } }, { method: "PATCH", headers: admin });
    assert.equal(patched.status, 200, await patched.clone().text());
    assert.deepEqual(((await patched.json()) as { budget: unknown }).budget, { amountMicros: 10, period: "month" });
    const refused = await ask(key, 20);
    assert.equal(refused.status, 429);
    assert.match(((await refused.json()) as { error: { message: string } }).error.message, /The account's budget of 0\.000010 USD per month/);
    const audit = (await (await s.get(`/admin/v1/audit?account=${accountId}&action=account.update`, { headers: admin })).json()) as { data: { detail: { changes: Record<string, unknown> } }[] };
    assert.deepEqual(audit.data[0].detail.changes.budget, { from: null, to: { amountMicros: 10, period: "month" } });
    const plan = (await (await s.get(`/admin/v1/accounts/${accountId}/plan`, { headers: admin })).json()) as { budget: { source: string; amount: string; left: string } };
    assert.deepEqual([plan.budget.source, plan.budget.amount, plan.budget.left], ["account", "0.000010", "0.000010"]);
    // The CLI: back to the plan's budget, then `accounts show` prints what is left.
    const config = writeConfig(s.config.dataDir, { ...raw, dataDir: s.config.dataDir }, "cli.yaml");
    const cleared = await runCli(["accounts", "update", accountId, "--clear-budget", "--json", "--config", config]);
    assert.equal(cleared.code, 0, cleared.stderr);
    assert.equal(JSON.parse(cleared.stdout).budget, undefined, "no budget of its own");
    const shown = await runCli(["accounts", "show", accountId, "--config", config]);
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, /budget: +0\.000100 USD per day \(the plan's\): 0\.000000 spent, 0\.000100 left \(resets .*T00:00:00Z\)/);
    assert.match(shown.stdout, /token quota: +none/);
    // The key cache (500 ms) picks up the account's change.
    await waitFor(() => ask(key, 20), (r) => r.status === 200, "the plan's budget to apply again", 5000, 100);
  });
});
