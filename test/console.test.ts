import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash, X509Certificate } from "node:crypto";
import { mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { startServer, modelsDir, repoRoot, type TestServer } from "./helpers/server.ts";
import { errorOf } from "./helpers/errors.ts";

/**
 * The web console in a real Chromium (Debian's `chromium`, driven by playwright-core; .ci/run installs it): the
 * whole support flow clicked through, with a screenshot of each page, axe-core on every page, and the cookie,
 * CSRF and key-display rules checked from outside the browser too.
 */
const adminToken = "console-test-admin-token-0123456789";
const artifacts = path.join(repoRoot, "test-artifacts/console");
const chromiumPath = process.env.MODELGATE_CHROMIUM ?? "/usr/bin/chromium";
const axePath = createRequire(import.meta.url).resolve("axe-core/axe.min.js");

let srv: TestServer;
let browser: Browser;
let page: Page;

/** Chromium trusts exactly the server's certificate (by its public key); certificate checks stay on for the rest. */
function spkiHash(pem: string): string {
  const der = new X509Certificate(pem).publicKey.export({ type: "spki", format: "der" });
  return createHash("sha256").update(der).digest("base64");
}

before(async () => {
  mkdirSync(artifacts, { recursive: true });
  srv = await startServer({
    adminToken,
    // Room for the click-through (its 401 checks count too), small enough to reach in the limiter test.
    anonymousRateLimit: { requests: 40, window: "1m" },
    models: [{ id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, parallel: 2, threads: 1 }],
  });
  browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox", `--ignore-certificate-errors-spki-list=${spkiHash(srv.ca)}`] });
  // bypassCSP only lets the test inject axe-core: the page's own CSP header is checked below.
  page = await browser.newPage({ viewport: { width: 1280, height: 900 }, bypassCSP: true });
});

after(async () => {
  await browser?.close();
  await srv?.close();
});

/** axe-core in the page: no serious or critical violation. */
async function assertAccessible(name: string): Promise<void> {
  await page.addScriptTag({ path: axePath });
  const violations = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(): Promise<{ violations: { id: string; impact: string; nodes: unknown[] }[] }> } }).axe;
    const result = await axe.run();
    return result.violations.filter((v) => v.impact === "serious" || v.impact === "critical").map((v) => `${v.id} (${v.impact}, ${v.nodes.length} nodes)`);
  });
  assert.deepEqual(violations, [], `${name}: axe-core found ${violations.join(", ")}`);
}

async function shot(name: string): Promise<void> {
  await page.screenshot({ path: path.join(artifacts, `${name}.png`), fullPage: true });
}

const chat = (key: string) => srv.post("/v1/chat/completions", { model: "stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 4 }, { key });

test("console: log in, create an account and a key, use it, see usage, rotate, revoke, find it all in the audit log, log out", async () => {
  const login = await page.goto(`${srv.origin}/console`);
  assert.equal(login!.status(), 200);
  assert.match(login!.headers()["content-security-policy"] ?? "", /script-src 'self' 'sha256-/);
  await page.getByLabel("Admin token").fill("wrong-token");
  await page.getByRole("button", { name: "Log in" }).click();
  await page.getByRole("alert").waitFor();
  await assertAccessible("login");
  await shot("login");

  // 1. log in (keyboard only: type, Enter)
  await page.getByLabel("Admin token").fill(adminToken);
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Accounts" }).waitFor();
  const cookie = (await page.context().cookies()).find((c) => c.name === "modelgate_console")!;
  assert.ok(cookie.httpOnly && cookie.secure && cookie.sameSite === "Strict" && cookie.expires > Date.now() / 1000, JSON.stringify(cookie));
  assert.ok(!cookie.value.includes(adminToken));

  // 2. an account with a contact
  await page.getByLabel("Name", { exact: true }).fill("acme-console");
  await page.getByLabel("Contact addresses").fill("ops@acme.example");
  await page.getByRole("button", { name: "Create account" }).click();
  await page.getByRole("heading", { name: "Account acme-console" }).waitFor();
  await assertAccessible("account");

  // 3. a key, acting on behalf of the contact; its value shown once
  await page.getByLabel("Acting on behalf of").selectOption("ops@acme.example");
  await page.getByLabel("Key name").fill("ci");
  await page.getByRole("checkbox", { name: "chat" }).check();
  await page.getByRole("button", { name: "Create key" }).click();
  const first = (await page.getByTestId("key-value").textContent())!;
  assert.match(first, /^mg_/);
  await page.getByText("you will not see it again").waitFor();
  await shot("key-created");
  await page.getByRole("button", { name: "I have stored it" }).click();
  assert.ok(!(await page.content()).includes(first), "the value is gone once acknowledged");

  // 4. the key works on a real chat completion
  assert.equal((await chat(first)).status, 200);

  // 5. its usage appears
  await srv.server.ctx.usage.flush();
  await page.getByRole("link", { name: "Usage of this account" }).click();
  await page.getByRole("cell", { name: "stories" }).first().waitFor();
  await page.locator(".chart canvas").first().waitFor();
  await assertAccessible("usage");
  await shot("usage");

  // 6. rotate: a second key shown once, and both work
  await page.goBack();
  await page.getByRole("heading", { name: "Account acme-console" }).waitFor();
  const prefix = first.slice(0, 11);
  await page.getByRole("button", { name: `Rotate key ${prefix}` }).click();
  await page.getByRole("heading", { name: "Rotated: the new key" }).waitFor();
  const second = (await page.getByTestId("key-value").textContent())!;
  assert.notEqual(second, first);
  await page.getByText("still works").waitFor();
  await shot("keys");
  assert.equal((await chat(first)).status, 200);
  assert.equal((await chat(second)).status, 200);

  // 7. revoke the old one (with confirmation): 401 within 1 s
  await page.getByRole("button", { name: "Revoke the old key" }).click();
  await page.getByRole("dialog").getByRole("button", { name: "Revoke key" }).click();
  await page.getByRole("cell", { name: /^revoked/ }).waitFor();
  const revokedAt = Date.now();
  let status = 0;
  while (Date.now() - revokedAt < 1000 && (status = (await chat(first)).status) !== 401) await new Promise((r) => setTimeout(r, 50));
  assert.equal(status, 401, "the old key is refused within 1 s");
  assert.equal((await chat(second)).status, 200);
  await page.getByRole("button", { name: "I have stored it" }).click();
  await assertAccessible("keys");
  await shot("keys-after-revoke");
  const html = await page.content();
  assert.ok(!html.includes(first) && !html.includes(second), "no key value on the keys page");

  // 8. every step in the audit log
  await page.getByRole("link", { name: "Audit log", exact: true }).click();
  await page.getByLabel("Account (name or id)").fill("acme-console");
  await page.getByLabel("Account (name or id)").press("Enter");
  await page.locator('tr[data-action="key.revoke"]').waitFor();
  const actions = await page.locator("tbody tr").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-action")));
  assert.deepEqual(actions, ["key.revoke", "key.rotate", "key.create", "account.create"]);
  const created = page.locator('tr[data-action="key.create"]');
  assert.match((await created.textContent())!, /console.*ops@acme\.example/);
  assert.ok(!(await page.content()).includes(first));
  await assertAccessible("audit");
  await shot("audit");

  // 9. log out: the cookie is refused afterwards
  const stale = (await page.context().cookies()).find((c) => c.name === "modelgate_console")!.value;
  await page.getByRole("button", { name: "Log out" }).click();
  await page.getByLabel("Admin token").waitFor();
  const after = await errorOf(await srv.get("/admin/v1/accounts", { headers: { cookie: `modelgate_console=${stale}` } }));
  assert.deepEqual([after.status, after.code], [401, "invalid_api_key"]);
});

test("console: a change with the cookie but without the CSRF token is refused; with it, it goes through; failed logins are rate limited", async () => {
  const res = await srv.post("/console/api/login", { token: adminToken });
  assert.equal(res.status, 200);
  const { csrfToken } = (await res.json()) as { csrfToken: string };
  const setCookie = res.headers.get("set-cookie")!;
  assert.match(setCookie, /HttpOnly/i);
  assert.match(setCookie, /Secure/i);
  assert.match(setCookie, /SameSite=Strict/i);
  assert.match(setCookie, /Max-Age=\d+/i);
  const cookie = setCookie.split(";")[0]!;

  const forged = await errorOf(await srv.post("/admin/v1/accounts", { name: "csrf-victim" }, { headers: { cookie } }));
  assert.deepEqual([forged.status, forged.code], [401, "invalid_api_key"]);
  assert.equal((await srv.get("/admin/v1/accounts", { headers: { cookie } })).status, 200, "reads need no CSRF token");
  const made = await srv.post("/admin/v1/accounts", { name: "csrf-ok" }, { headers: { cookie, "x-csrf-token": csrfToken } });
  assert.equal(made.status, 201);
  const wrongContact = await errorOf(await srv.post("/admin/v1/keys", { account: "csrf-ok" }, { headers: { cookie, "x-csrf-token": csrfToken, "x-on-behalf-of": "someone@else.example" } }));
  assert.deepEqual([wrongContact.status, wrongContact.param], [400, "on_behalf_of"]);

  let limited: Response | null = null;
  for (let i = 0; i < 60 && !limited; i++) {
    const r = await srv.post("/console/api/login", { token: `guess-${i}` });
    if (r.status === 429) limited = r;
    else assert.equal(r.status, 401);
  }
  assert.ok(limited, "failed logins hit the per-address limiter");
  assert.ok(Number(limited.headers.get("retry-after")) >= 1);
});

test("console: the first load is under 200 KB", async () => {
  const fresh = await browser.newPage();
  let bytes = 0;
  fresh.on("response", async (response) => {
    bytes += (await response.body().catch(() => Buffer.alloc(0))).length + JSON.stringify(response.headers()).length;
  });
  await fresh.goto(`${srv.origin}/console`, { waitUntil: "networkidle" });
  await fresh.getByLabel("Admin token").waitFor();
  await fresh.close();
  assert.ok(bytes < 200_000, `${bytes} bytes on the first load`);
});
