import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash, X509Certificate } from "node:crypto";
import { mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { startServer, modelsDir, repoRoot, type TestServer } from "../harness/server.ts";
import { errorOf } from "./helpers/errors.ts";

/**
 * The web console (spec §2.9) in a real Chromium (Debian's `chromium`, driven by playwright-core; .ci/run installs
 * it): the whole support flow clicked through, with a screenshot of each page, axe-core on every page, keyboard
 * use and visible focus, the page working under its own CSP, and the size of the first load.
 * (test/console-http.test.ts checks the cookie, CSRF, files and audit rules from outside a browser.)
 */
const adminToken = "qH3WkbBNtmLzXg_sPNpZkGIthnnfeyeesrPAXwckHSw";
const cookieName = "__Host-modelgate_console";
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
    // Room for the click-through's own refusals (a wrong login, the cookie after logout).
    anonymousRateLimit: { requests: 40, window: "1m" },
    models: [{ id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, parallel: 2, threads: 1 }],
  });
  browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox", `--ignore-certificate-errors-spki-list=${spkiHash(srv.ca)}`] });
  // bypassCSP only lets this page inject axe-core; the last test runs the console under its own CSP.
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

/**
 * Tabs through the whole page, freshly loaded, until the focus leaves it: each control reached shows a focus ring
 * (an outline of at least 2 px). Returns the names of the controls reached, in order.
 */
async function tabThrough(heading: string): Promise<string[]> {
  await page.reload();
  await page.getByRole("heading", { name: heading }).waitFor();
  const reached: string[] = [];
  for (let i = 0; i < 100; i++) {
    await page.keyboard.press("Tab");
    const focus = await page.evaluate(() => {
      const el = document.activeElement as HTMLElement | null;
      if (!el || el === document.body) return null;
      const style = getComputedStyle(el);
      const label = el.getAttribute("aria-label") ?? (el as HTMLInputElement).labels?.[0]?.textContent ?? el.textContent ?? "";
      return { name: `${el.tagName.toLowerCase()} ${label.trim().slice(0, 40)}`, outline: style.outlineStyle, width: parseFloat(style.outlineWidth) };
    });
    if (!focus) return reached;
    assert.ok(focus.outline !== "none" && focus.width >= 2, `${focus.name}: no visible focus (${focus.outline} ${focus.width}px)`);
    reached.push(focus.name);
  }
  assert.fail(`the focus never left the page: ${reached.join(" | ")}`);
}

async function shot(name: string): Promise<void> {
  await page.screenshot({ path: path.join(artifacts, `${name}.png`), fullPage: true });
}

const adminHeaders = { authorization: `Bearer ${adminToken}` };
const chat = (key: string) => srv.post("/v1/chat/completions", { model: "stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 4 }, { key });

/** Waits for the key's last use to reach the store (written in batches about once a second). */
async function lastUsedRecorded(account: string, keyId: string): Promise<void> {
  for (const started = Date.now(); Date.now() - started < 5000; await new Promise((r) => setTimeout(r, 100))) {
    const keys = (await (await srv.get(`/admin/v1/keys?account=${account}`, { headers: adminHeaders })).json()) as { data: { id: string; lastUsedAt: string | null }[] };
    if (keys.data.find((k) => k.id === keyId)?.lastUsedAt) return;
  }
  assert.fail("last_used_at was not recorded");
}

test("§2.9 console: log in, create an account and a key, use it, see usage, rotate, revoke, find it all in the audit log, log out", async () => {
  const login = await page.goto(`${srv.origin}/console`);
  assert.equal(login!.status(), 200);
  await page.getByLabel("Admin token").fill("wrong-token");
  await page.getByRole("button", { name: "Log in" }).click();
  await page.getByRole("alert").waitFor();
  await assertAccessible("login");
  await shot("login");

  // 1. log in, by the keyboard alone (type, Enter)
  await page.getByLabel("Admin token").fill(adminToken);
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Accounts" }).waitFor();
  const cookie = (await page.context().cookies()).find((c) => c.name === cookieName)!;
  assert.ok(cookie.httpOnly && cookie.secure && cookie.sameSite === "Strict" && cookie.expires > Date.now() / 1000, JSON.stringify(cookie));
  assert.ok(!cookie.value.includes(adminToken));
  await assertAccessible("accounts");
  await shot("accounts");

  // 2. an account with a contact
  await page.getByLabel("Name", { exact: true }).fill("acme-console");
  await page.getByLabel("Contact addresses").fill("ops@acme.example");
  await page.getByRole("button", { name: "Create account" }).click();
  await page.getByRole("heading", { name: "Account acme-console" }).waitFor();
  await assertAccessible("account");
  const reached = await tabThrough("Account acme-console");
  for (const control of ["a Skip to content", "a Audit log", "button Log out", "select Acting on behalf of (optional)", "input Key name", "input chat", "button Create key", "input IP allowlist", "button Save account"]) {
    assert.ok(reached.includes(control), `the keyboard reaches ${control} (reached: ${reached.join(" | ")})`);
  }

  // 3. a key, acting on behalf of the contact; its value shown once
  await page.getByLabel("Acting on behalf of").selectOption("ops@acme.example");
  await page.getByLabel("Key name").fill("ci");
  await page.getByRole("checkbox", { name: "chat" }).check();
  await page.getByRole("button", { name: "Create key" }).click();
  const first = (await page.getByTestId("key-value").textContent())!;
  assert.match(first, /^mg_/);
  await page.getByText("you will not see it again").waitFor();
  assert.equal(await page.evaluate(() => document.activeElement?.className), "once", "the focus moves to the key shown once");
  await page.getByRole("button", { name: "Copy key" }).waitFor();
  await shot("key-created");
  await page.getByRole("button", { name: "I have stored it" }).click();
  assert.ok(!(await page.content()).includes(first), "the value is gone once acknowledged");
  const firstId = ((await (await srv.get("/admin/v1/keys?account=acme-console", { headers: adminHeaders })).json()) as { data: { id: string }[] }).data[0]!.id;

  // 4. the key works on a real chat completion
  assert.equal((await chat(first)).status, 200);
  await lastUsedRecorded("acme-console", firstId);

  // 5. its usage appears, as charts and a table, and exports as CSV
  await srv.server.ctx.usage.flush();
  await page.getByRole("link", { name: "Usage of this account" }).click();
  await page.getByRole("cell", { name: "stories" }).first().waitFor();
  await page.locator(".chart canvas").first().waitFor();
  assert.equal(await page.locator(".chart canvas").count(), 3, "requests, prompt tokens, completion tokens");
  const account = (await (await srv.get("/admin/v1/accounts/acme-console", { headers: adminHeaders })).json()) as { id: string };
  assert.equal(await page.getByLabel("Account", { exact: true }).inputValue(), account.id, "the account filter shows this account");
  const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Export CSV" }).click()]);
  const csv = readFileSync((await download.path())!, "utf8").trim().split("\n");
  assert.equal(csv[0], "day,account_id,key_id,key_prefix,model,requests,prompt_tokens,completion_tokens");
  assert.match(csv[1]!, new RegExp(`^\\d{4}-\\d{2}-\\d{2},acct_\\w+,${firstId},${first.slice(0, 11)},stories,1,[1-9]\\d*,[1-9]\\d*$`));
  assert.ok(!(await page.content()).includes(first), "no key value on the usage page");
  await assertAccessible("usage");
  await shot("usage");

  // 6. rotate: a second key shown once, and both work; the first shows its last use
  await page.goBack();
  await page.getByRole("heading", { name: "Account acme-console" }).waitFor();
  const prefix = first.slice(0, 11);
  const firstRow = page.getByRole("row").filter({ hasText: prefix });
  assert.match((await firstRow.locator("td").nth(3).textContent())!, /^\d{4}-\d{2}-\d{2} .* UTC$/, "last used");
  await page.getByRole("button", { name: `Rotate key ${prefix}` }).click();
  await page.getByRole("heading", { name: "Rotated: the new key" }).waitFor();
  const second = (await page.getByTestId("key-value").textContent())!;
  assert.notEqual(second, first);
  await page.getByText("still works").waitFor();
  await shot("keys");
  assert.equal((await chat(first)).status, 200);
  assert.equal((await chat(second)).status, 200);

  // 7. revoke the old one, by the keyboard: the dialog opens on Cancel, Escape backs out, then confirm; 401 within 1 s
  await page.getByRole("button", { name: "Revoke the old key" }).focus();
  await page.keyboard.press("Enter");
  await page.getByRole("dialog").waitFor();
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Cancel");
  await page.keyboard.press("Escape");
  await page.getByRole("dialog").waitFor({ state: "hidden" });
  assert.equal((await chat(first)).status, 200, "backing out revokes nothing");
  await page.keyboard.press("Enter");
  await page.getByRole("dialog").waitFor();
  await page.keyboard.press("Shift+Tab");
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Revoke key");
  await page.keyboard.press("Enter");
  await page.getByRole("cell", { name: /^revoked/ }).waitFor();
  const revokedAt = Date.now();
  let status = 0;
  while (Date.now() - revokedAt < 1000 && (status = (await chat(first)).status) !== 401) await new Promise((r) => setTimeout(r, 50));
  assert.equal(status, 401, "the old key is refused within 1 s");
  assert.equal((await chat(second)).status, 200);
  await page.getByRole("button", { name: "I have stored it" }).click();
  await assertAccessible("keys");
  await shot("keys-after-revoke");
  const keysPage = await page.content();
  assert.ok(!keysPage.includes(first) && !keysPage.includes(second), "no key value on the keys page");

  // 8. every step in the audit log
  await page.getByRole("link", { name: "Audit log", exact: true }).click();
  await page.getByLabel("Account (name or id)").fill("acme-console");
  await page.getByLabel("Account (name or id)").press("Enter");
  // The page shows every entry (the logins' auth.* ones too) until the filtered list arrives.
  const expected = ["key.revoke", "key.rotate", "key.create", "account.create"];
  const shown = () => page.locator("tbody tr").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-action")));
  const until = Date.now() + 10_000;
  while (JSON.stringify(await shown()) !== JSON.stringify(expected) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
  const actions = await shown();
  assert.deepEqual(actions, expected);
  for (const action of actions) assert.match((await page.locator(`tr[data-action="${action}"]`).textContent())!, /console.*acme-console acct_.*127\.0\.0\.1/);
  assert.match((await page.locator('tr[data-action="key.create"]').textContent())!, /ops@acme\.example/);
  assert.match((await page.locator('tr[data-action="key.revoke"]').textContent())!, new RegExp(`${firstId} \\(${prefix}…\\)`));
  const auditPage = await page.content();
  assert.ok(!auditPage.includes(first) && !auditPage.includes(second), "no key value in the audit log");
  await assertAccessible("audit");
  await shot("audit");

  // 9. log out: the cookie is refused afterwards
  const stale = (await page.context().cookies()).find((c) => c.name === cookieName)!.value;
  await page.getByRole("button", { name: "Log out" }).click();
  await page.getByLabel("Admin token").waitFor();
  assert.equal((await page.context().cookies()).find((c) => c.name === cookieName), undefined, "logout clears the cookie");
  const after = await errorOf(await srv.get("/admin/v1/accounts", { headers: { cookie: `${cookieName}=${stale}` } }));
  assert.deepEqual([after.status, after.code], [401, "invalid_api_key"]);
});

test("§2.9 console: a login that ends while the page is open (logout elsewhere, restart, expiry) brings back the login form", async () => {
  const context = await browser.newContext();
  const tab = await context.newPage();
  try {
    await tab.goto(`${srv.origin}/console#/audit`);
    await tab.getByLabel("Admin token").fill(adminToken);
    await tab.keyboard.press("Enter");
    await tab.getByRole("heading", { name: "Audit log" }).waitFor();
    // The same login ended from outside the page: its cookie and CSRF token, as another tab would send them.
    const cookie = `${cookieName}=${(await context.cookies()).find((c) => c.name === cookieName)!.value}`;
    const { csrfToken } = (await (await srv.get("/console/api/session", { headers: { cookie } })).json()) as { csrfToken: string };
    assert.equal((await srv.post("/console/api/logout", {}, { headers: { cookie, "x-csrf-token": csrfToken } })).status, 200);
    await tab.getByLabel("Actor").selectOption("cli");
    await tab.getByText("Your console login has ended: log in again.").waitFor();
    await tab.getByLabel("Admin token").waitFor();
  } finally {
    await context.close();
  }
});

test("§2.9 console: under its own CSP every page works (no violation), and the first load is under 200 KB transferred", async () => {
  const { key } = await srv.createKey();
  assert.equal((await chat(key)).status, 200);
  await srv.server.ctx.usage.flush();

  const tab = await browser.newPage();
  const violations: string[] = [];
  tab.on("console", (message) => {
    if (/Content Security Policy/i.test(message.text())) violations.push(message.text());
  });
  // Bytes on the wire as Chromium counts them (headers and bodies, encodedDataLength), for everything the load fetches.
  const cdp = await tab.context().newCDPSession(tab);
  await cdp.send("Network.enable");
  let transferred = 0;
  cdp.on("Network.loadingFinished", (event) => {
    transferred += event.encodedDataLength;
  });
  const response = await tab.goto(`${srv.origin}/console`, { waitUntil: "networkidle" });
  assert.match(response!.headers()["content-security-policy"] ?? "", /default-src 'none'; script-src 'self' 'sha256-/);
  await tab.getByLabel("Admin token").waitFor();
  const firstLoad = transferred;
  console.log(`console first load: ${firstLoad} bytes transferred`);
  assert.ok(firstLoad > 10_000 && firstLoad < 200_000, `${firstLoad} bytes on the first load`);

  await tab.getByLabel("Admin token").fill(adminToken);
  await tab.keyboard.press("Enter");
  await tab.getByRole("heading", { name: "Accounts" }).waitFor();
  await tab.goto(`${srv.origin}/console#/usage`);
  await tab.locator(".chart canvas").first().waitFor();
  await tab.goto(`${srv.origin}/console#/audit`);
  await tab.locator("tbody tr").first().waitFor();
  await tab.close();
  assert.deepEqual(violations, []);
});
