// test: long (39 s alone, 17 s of it CPU)
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash, X509Certificate } from "node:crypto";
import { mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { startServer, modelsDir, repoRoot, type TestServer } from "../harness/server.ts";
import { errorOf } from "./helpers/errors.ts";
import { inviteWithToken, joinWithToken, testPassword } from "./helpers/console-users.ts";
import { totpCode } from "../src/auth/totp.ts";
import { toFile } from "openai";
import { waitFor } from "./helpers/wait-for.ts";

/**
 * The web console (spec §2.9, issue 33) in a real Chromium (Debian's `chromium`, driven by playwright-core; .ci/run
 * installs it), one browser for the file: an operator invites a member; the member accepts, sets a password, turns
 * on TOTP, creates a key, reads it once and calls the API with it, sees usage, rotates and revokes, checks the plan's
 * limits, invites a viewer and reads the audit log; the viewer can change nothing. axe-core runs on every page,
 * each page is screenshot, the keyboard reaches every control with a visible focus, every page works under its own
 * CSP, and the first load is measured. (console-http.test.ts and console-users.test.ts check the rules over HTTP.)
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
    // Room for the click-through's own refusals (a wrong password, the cookie after sign-out).
    anonymousRateLimit: { requests: 40, window: "1m" },
    plans: { default: { endpoints: ["models", "chat", "embeddings"] } },
    models: [{ id: "stories", engine: "llama", source: path.join(modelsDir, "stories260K.gguf"), capabilities: ["chat"], contextSize: 256, parallel: 2, threads: 1 }],
    routes: [{ id: "story-time", targets: [{ model: "stories" }] }],
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

/** A fresh browser profile (its own cookies), on the shared Chromium. */
async function newTab(): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, bypassCSP: true, acceptDownloads: true });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: srv.origin });
  return context.newPage();
}

/** Opens a one-time link, sets the password twice and lands signed in on the Security page. */
async function accept(tab: Page, link: string, password = testPassword): Promise<void> {
  await tab.goto(link.startsWith("https://") ? link : `${srv.origin}${link}`);
  await tab.getByLabel("New password").fill(password);
  await tab.getByLabel("The same password again").fill(password);
  await tab.getByRole("button", { name: /Set the password/ }).click();
  await tab.getByRole("heading", { name: "Security" }).waitFor();
}

test("§2.9 issue 33 console: an operator invites a member; the member joins, turns on TOTP, creates a key and uses it once, sees usage, rotates and revokes, reads the limits, invites a viewer who can change nothing; the audit log names each of them", async () => {
  // The first operator, invited with the admin token (the bootstrap), joins in the browser.
  const operatorLink = `/console#/invite/${await inviteWithToken(srv.fetch, srv.origin, adminToken, null, "ops@modelgate.example", "operator-admin")}`;
  const op = await newTab();
  page = op;
  await op.goto(`${srv.origin}/console`);
  await op.getByLabel("Email").fill("ops@modelgate.example");
  await op.getByLabel("Password").fill("not the password at all");
  await op.getByRole("button", { name: "Sign in" }).click();
  await op.getByRole("alert").waitFor();
  await assertAccessible("sign-in");
  await shot("sign-in");
  await op.goto(`${srv.origin}${operatorLink}`);
  await op.getByText("invited as an operator").waitFor();
  await assertAccessible("invite");
  await shot("invite");
  await accept(op, operatorLink);
  const cookie = (await op.context().cookies()).find((c) => c.name === cookieName)!;
  assert.ok(cookie.httpOnly && cookie.secure && cookie.sameSite === "Strict" && cookie.expires > Date.now() / 1000, JSON.stringify(cookie));

  // 1. the operator creates the account and invites its owner
  await op.getByRole("link", { name: "Accounts" }).click();
  await op.getByLabel("Name", { exact: true }).fill("acme-console");
  await op.getByLabel("Contact addresses").fill("ops@acme.example");
  await op.getByRole("button", { name: "Create account" }).click();
  await op.getByRole("heading", { name: "Account acme-console" }).waitFor();
  await assertAccessible("operator account");
  await op.getByRole("link", { name: "Members" }).click();
  await op.getByLabel("Email").fill("owner@acme.example");
  await op.getByLabel("Role", { exact: true }).selectOption("owner");
  await op.getByRole("button", { name: "Create invite link" }).click();
  const ownerLink = (await op.getByTestId("invite-link").textContent())!;
  assert.match(ownerLink, /^https:\/\/127\.0\.0\.1:\d+\/console#\/invite\/[\w-]{43}$/);
  await assertAccessible("operator members");
  await shot("operator-invite");
  await op.getByRole("button", { name: "Done" }).click();
  assert.ok(!(await op.content()).includes(ownerLink), "the link is gone once acknowledged");

  // 2. the member accepts, sets a password and turns on TOTP; the recovery codes are shown once
  const member = await newTab();
  page = member;
  await accept(member, ownerLink);
  await member.getByRole("button", { name: "Turn on two-factor sign-in" }).click();
  const secret = (await member.getByTestId("totp-secret").textContent())!;
  await member.getByLabel("Code from the app").fill(totpCode(secret));
  await member.getByRole("button", { name: "Turn on", exact: true }).click();
  await member.getByRole("heading", { name: "Your recovery codes" }).waitFor();
  assert.equal(await member.getByTestId("recovery-codes").locator("li").count(), 10);
  await assertAccessible("security");
  await shot("member-totp");
  await member.getByRole("button", { name: "I have stored them" }).click();
  await member.getByText("On. Sign-in asks for the code").waitFor();

  // ... and signs in again with the password and a code (the next time step: each step is accepted once)
  await member.getByRole("button", { name: "Sign out", exact: true }).click();
  await member.getByLabel("Email").fill("owner@acme.example");
  await member.getByLabel("Password").fill(testPassword);
  await member.keyboard.press("Enter");
  await member.getByLabel("Authenticator code").fill(totpCode(secret, Date.now() + 30_000));
  await member.getByRole("button", { name: "Verify and sign in" }).click();
  // Back where the session ended (Security), then to the keys.
  await member.getByRole("heading", { name: "Security" }).waitFor();
  await member.getByRole("link", { name: "API keys" }).click();
  await member.getByRole("heading", { name: "API keys" }).waitFor();
  await assertAccessible("member keys");
  const reached = await tabThrough("API keys");
  for (const control of ["a Skip to content", "a Usage", "a Members", "button Sign out", "input Key name", "input chat", "button Create key"]) {
    assert.ok(reached.includes(control), `the keyboard reaches ${control} (reached: ${reached.join(" | ")})`);
  }
  assert.ok(!reached.some((c) => c.includes("Deployment") || c.includes("behalf")), "a member sets no deployment and acts for nobody else");

  // 3. a key, its value shown once; the API takes it
  await member.getByLabel("Key name").fill("ci");
  await member.getByRole("checkbox", { name: "chat" }).check();
  await member.getByRole("button", { name: "Create key" }).click();
  const first = (await member.getByTestId("key-value").textContent())!;
  assert.match(first, /^mg_/);
  await member.getByRole("button", { name: "Copy key" }).click();
  await member.getByText("Copied to the clipboard.").waitFor();
  assert.equal(await member.evaluate(() => navigator.clipboard.readText()), first);
  await shot("member-key-created");
  await member.getByRole("button", { name: "I have stored it" }).click();
  assert.ok(!(await member.content()).includes(first), "the value is gone once acknowledged");
  const completion = await srv.openai(first).chat.completions.create({ model: "stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 4 });
  assert.equal(completion.object, "chat.completion");
  const account = (await (await srv.get("/admin/v1/accounts/acme-console", { headers: adminHeaders })).json()) as { id: string };
  const firstId = ((await (await srv.get("/admin/v1/keys?account=acme-console", { headers: adminHeaders })).json()) as { data: { id: string }[] }).data[0]!.id;
  await lastUsedRecorded("acme-console", firstId);

  // 4. usage: charts, a table, a CSV of this account only
  await srv.server.ctx.usage.flush();
  await member.getByRole("link", { name: "Usage" }).click();
  await member.getByRole("cell", { name: "stories" }).first().waitFor();
  await member.locator(".chart canvas").nth(2).waitFor();
  assert.equal(await member.locator(".chart canvas").count(), 3, "requests, prompt tokens, completion tokens");
  assert.equal(await member.getByLabel("Account", { exact: true }).count(), 0, "a member has no account filter");
  const [download] = await Promise.all([member.waitForEvent("download"), member.getByRole("button", { name: "Export CSV" }).click()]);
  const csv = readFileSync((await download.path())!, "utf8").trim().split("\n");
  assert.equal(csv[0], "day,account_id,key_id,key_prefix,model,requests,prompt_tokens,completion_tokens,spend,currency");
  assert.match(csv[1]!, new RegExp(`^\\d{4}-\\d{2}-\\d{2},${account.id},${firstId},${first.slice(0, 11)},stories,1,[1-9]\\d*,[1-9]\\d*,0\\.000000,USD$`));
  await assertAccessible("usage");
  await shot("member-usage");

  // 5. rotate: the new key shown once, both work; revoke the old one: refused within 1 s
  await member.getByRole("link", { name: "API keys" }).click();
  const prefix = first.slice(0, 11);
  await member.getByRole("button", { name: `Rotate key ${prefix}` }).click();
  await member.getByRole("heading", { name: "Rotated: the new key" }).waitFor();
  const second = (await member.getByTestId("key-value").textContent())!;
  assert.notEqual(second, first);
  assert.equal((await chat(second)).status, 200);
  await member.getByRole("button", { name: "Revoke the old key" }).click();
  await member.getByRole("dialog").waitFor();
  await member.getByRole("dialog").getByRole("button", { name: "Revoke key" }).click();
  await member.getByRole("cell", { name: /^revoked/ }).waitFor();
  const revokedAt = Date.now();
  let status = 0;
  while (Date.now() - revokedAt < 1000 && (status = (await chat(first)).status) !== 401) await new Promise((r) => setTimeout(r, 50));
  assert.equal(status, 401, "the old key is refused within 1 s");
  await member.getByRole("button", { name: "I have stored it" }).click();
  await shot("member-keys");

  // 6. the plan's limits, with the place for the token quota and budget
  await member.getByRole("link", { name: "Plan and limits" }).click();
  await member.getByRole("cell", { name: "models, chat, embeddings" }).waitFor();
  await member.getByTestId("quota").getByText("no token quota or spending budget").waitFor();
  await assertAccessible("limits");
  await shot("member-limits");

  // 6b. the account's Batch API batches with their progress (issue 36)
  const batchClient = srv.openai(second);
  const lines = [1, 2, 3].map((i) => JSON.stringify({ custom_id: `c${i}`, method: "POST", url: "/v1/chat/completions", body: { model: "stories", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 4 } }));
  const input = await batchClient.files.create({ file: await toFile(Buffer.from(lines.join("\n")), "in.jsonl"), purpose: "batch" });
  const batch = await batchClient.batches.create({ input_file_id: input.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
  await waitFor(() => batchClient.batches.retrieve(batch.id), (b) => b.status === "completed", "the console's batch to complete");
  await member.getByRole("link", { name: "Batches" }).click();
  await member.getByRole("cell", { name: batch.id }).waitFor();
  await member.getByTestId("batches").getByText("3 of 3 lines").waitFor();
  await member.getByTestId("batches").getByRole("cell", { name: "completed" }).waitFor();
  await assertAccessible("batches");

  // 7. the owner invites a viewer
  await member.getByRole("link", { name: "Members" }).click();
  await member.getByLabel("Email").fill("viewer@acme.example");
  await member.getByLabel("Role", { exact: true }).selectOption("viewer");
  await member.getByRole("button", { name: "Create invite link" }).click();
  const viewerLink = (await member.getByTestId("invite-link").textContent())!;
  await member.getByRole("button", { name: "Done" }).click();
  await member.getByRole("cell", { name: "viewer@acme.example" }).waitFor();
  await assertAccessible("members");
  await shot("member-members");

  // 8. the viewer reads and cannot change anything: no control in the page, 403 from the API
  const viewer = await newTab();
  page = viewer;
  await accept(viewer, viewerLink);
  await viewer.getByRole("link", { name: "API keys" }).click();
  await viewer.getByRole("cell", { name: "ci" }).first().waitFor();
  for (const name of ["Create key", /^Rotate/, /^Revoke/]) assert.equal(await viewer.getByRole("button", { name }).count(), 0, `no ${name} button for a viewer`);
  assert.equal(await viewer.getByRole("link", { name: "Members" }).count(), 0);
  const fromViewer = await viewer.evaluate(async (account) => {
    const { csrfToken } = await (await fetch("/console/api/session")).json();
    const res = await fetch("/admin/v1/keys", { method: "POST", headers: { "content-type": "application/json", "x-csrf-token": csrfToken }, body: JSON.stringify({ account }) });
    return [res.status, (await res.json()).error.code];
  }, account.id);
  assert.deepEqual(fromViewer, [403, "permission_denied"]);
  await assertAccessible("viewer keys");
  await shot("viewer-keys");

  // 9. the audit log: each step by its person, never a shared token
  page = member;
  await member.getByRole("link", { name: "Audit log" }).click();
  // Newest first, sign-ins aside: the viewer's invite and joining, the key's life, TOTP, the owner's, the account.
  const expected = ["member.join", "member.invite", "key.revoke", "key.rotate", "key.create", "user.totp.enable", "member.join", "member.invite", "account.create"];
  const shown = async () => (await member.locator("tbody tr").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-action")))).filter((a) => a !== "auth.login");
  const until = Date.now() + 10_000;
  while (JSON.stringify(await shown()) !== JSON.stringify(expected) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual(await shown(), expected);
  assert.match((await member.locator('tr[data-action="key.create"]').textContent())!, /member owner@acme\.example/);
  assert.match((await member.locator('tr[data-action="account.create"]').textContent())!, /operator ops@modelgate\.example/);
  const auditPage = await member.content();
  assert.ok(!auditPage.includes(first) && !auditPage.includes(second), "no key value in the audit log");
  await assertAccessible("audit");
  await shot("member-audit");

  // 10. sign out: the cookie is refused afterwards
  const stale = (await member.context().cookies()).find((c) => c.name === cookieName)!.value;
  await member.getByRole("button", { name: "Sign out", exact: true }).click();
  await member.getByLabel("Email").waitFor();
  const after = await errorOf(await srv.get("/admin/v1/keys", { headers: { cookie: `${cookieName}=${stale}` } }));
  assert.deepEqual([after.status, after.code], [401, "invalid_api_key"]);
  for (const tab of [op, member, viewer]) await tab.context().close();
});

test("issue 42.8-9 console: an owner sees a member's pending reset link beside the invites and withdraws it; a reset link for a member with TOTP on asks for the code", async () => {
  const account = (await (await srv.post("/admin/v1/accounts", { name: "reset-links" }, { headers: adminHeaders })).json()) as { id: string };
  const member = await joinWithToken(srv.fetch, srv.origin, adminToken, account.id, "totp@reset-links.example", "developer");
  const setup = await member.json<{ secret: string }>("POST", "/console/api/totp/setup");
  await member.json("POST", "/console/api/totp/enable", { code: totpCode(setup.secret) });
  const owner = await newTab();
  try {
    page = owner;
    await accept(owner, `/console#/invite/${await inviteWithToken(srv.fetch, srv.origin, adminToken, account.id, "owner@reset-links.example", "owner")}`);
    await owner.getByRole("link", { name: "Members" }).click();
    await owner.getByRole("button", { name: "Password reset link for totp@reset-links.example" }).click();
    await owner.getByRole("heading", { name: "Password reset link" }).waitFor();
    await owner.getByRole("button", { name: "Done" }).click();
    const pending = owner.getByTestId("reset-links");
    await pending.getByRole("rowheader", { name: "totp@reset-links.example" }).waitFor();
    assert.match((await pending.textContent())!, /owner@reset-links\.example.*asked on use/);
    assert.equal(await owner.getByRole("button", { name: /clearing two-factor/ }).count(), 0, "an owner cannot clear a member's TOTP");
    await assertAccessible("members with a pending reset link");
    await owner.getByRole("button", { name: "Withdraw the reset link for totp@reset-links.example" }).click();
    await pending.waitFor({ state: "detached" });

    // The member opens a new link (in this browser: accepting it signs the owner out and the member in).
    const link = (await (await srv.post(`/admin/v1/users/${member.user.id}/password-reset`, {}, { headers: adminHeaders })).json()) as { path: string };
    await owner.goto(`${srv.origin}${link.path}`);
    await owner.getByLabel("New password").fill("a fresh password for the reset");
    await owner.getByLabel("The same password again").fill("a fresh password for the reset");
    await owner.getByLabel("Authenticator code").fill(totpCode(setup.secret, Date.now() + 30_000));
    await assertAccessible("reset with a second factor");
    await owner.getByRole("button", { name: /Set the password/ }).click();
    await owner.getByRole("heading", { name: "Security" }).waitFor();
    assert.match((await owner.getByRole("banner").textContent()) ?? "", /totp@reset-links\.example/);
  } finally {
    await owner.context().close();
  }
});

test("§2.9 console: a session that ends while the page is open (sign-out elsewhere, expiry) brings back the sign-in form", async () => {
  const tab = await newTab();
  try {
    await accept(tab, `/console#/invite/${await inviteWithToken(srv.fetch, srv.origin, adminToken, null, "ended@modelgate.example", "operator-viewer")}`);
    await tab.getByRole("link", { name: "Audit log" }).click();
    await tab.getByRole("heading", { name: "Audit log" }).waitFor();
    // The same session ended from outside the page: its cookie and CSRF token, as another tab would send them.
    const cookie = `${cookieName}=${(await tab.context().cookies()).find((c) => c.name === cookieName)!.value}`;
    const { csrfToken } = (await (await srv.get("/console/api/session", { headers: { cookie } })).json()) as { csrfToken: string };
    assert.equal((await srv.post("/console/api/logout", {}, { headers: { cookie, "x-csrf-token": csrfToken, origin: srv.origin } })).status, 200);
    // The page's next call finds the session gone: this change of filter, or, when the page's own first loads (the
    // entries, the account names) were still on their way at the sign-out, one of those, and the filter is gone.
    await tab.getByLabel("Actor").selectOption("cli", { timeout: 2000 }).catch(() => tab.getByLabel("Email").waitFor());
    await tab.getByText("Your session has ended: sign in again.").waitFor();
    await tab.getByLabel("Email").waitFor();
  } finally {
    await tab.context().close();
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
  await tab.getByLabel("Email").waitFor();
  const firstLoad = transferred;
  console.log(`console first load: ${firstLoad} bytes transferred`);
  assert.ok(firstLoad > 10_000 && firstLoad < 200_000, `${firstLoad} bytes on the first load`);

  await tab.getByLabel("Email").fill("ops@modelgate.example");
  await tab.getByLabel("Password").fill(testPassword);
  await tab.keyboard.press("Enter");
  await tab.getByRole("heading", { name: "Accounts" }).waitFor();
  await tab.goto(`${srv.origin}/console#/usage`);
  await tab.locator(".chart canvas").first().waitFor();
  await tab.goto(`${srv.origin}/console#/audit`);
  await tab.locator("tbody tr").first().waitFor();
  // Issue 31: the operators' model view shows each model's queue by account and share of the last minute's tokens.
  await tab.goto(`${srv.origin}/console#/models`);
  const row = tab.getByRole("table", { name: /Queue by account/ }).locator("tbody tr").first();
  await row.waitFor();
  assert.match((await row.textContent()) ?? "", /^acct_\w+.* \/ .*\d+%$/, "account, weight, waiting, running, tokens and share");
  // Issue 45: each route's split and what each model answered for it in the last minute.
  const routed = await srv.post("/v1/chat/completions", { model: "story-time", messages: [{ role: "user", content: "Once upon a time" }], max_tokens: 2 }, { key: (await srv.createKey()).key });
  assert.equal(routed.headers.get("x-modelgate-route"), "story-time; target=stories; fallbacks=0");
  const split = tab.getByRole("table", { name: /Split and fallbacks/ }).locator("tbody tr").first();
  await waitFor(async () => (await split.textContent()) ?? "", (text) => text.endsWith("1"), "the route's row after a request through it");
  assert.equal(await split.textContent(), "stories100% of new conversations (weight 1)ready1");
  await tab.close();
  assert.deepEqual(violations, []);
});
