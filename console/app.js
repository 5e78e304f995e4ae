import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, onSessionEnded, setCsrf } from "./api.js";
import { html } from "./ui.js";
import { AccountsPage } from "./pages/accounts.js";
import { AccountPage } from "./pages/account.js";
import { UsagePage } from "./pages/usage.js";
import { AuditPage } from "./pages/audit.js";
import { MembersPage } from "./pages/members.js";
import { LimitsPage } from "./pages/limits.js";
import { BatchesPage } from "./pages/batches.js";
import { SecurityPage } from "./pages/security.js";
import { ModelsPage } from "./pages/models.js";
import { SignInPage, AcceptInvitePage } from "./pages/signin.js";

/** The fragment as [page, ...args] and its query: #/accounts/acct_1/members?x=y. */
function useRoute() {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const onChange = () => setHash(location.hash);
    addEventListener("hashchange", onChange);
    return () => removeEventListener("hashchange", onChange);
  }, []);
  const [path, query = ""] = hash.slice(2).split("?");
  return { parts: path.split("/").filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(query) };
}

const memberSections = (me) => [
  ["keys", "API keys"],
  ["usage", "Usage"],
  ["batches", "Batches"],
  ["limits", "Plan and limits"],
  ...(me.role === "owner" ? [["members", "Members"]] : []),
  ["audit", "Audit log"],
  ["security", "Security"],
];
const operatorSections = [
  ["accounts", "Accounts"],
  ["models", "Models"],
  ["usage", "Usage"],
  ["batches", "Batches"],
  ["audit", "Audit log"],
  ["operators", "Operators"],
  ["security", "Security"],
];

/** What a member sees: their own account only, and what their role allows. */
function memberPage(me, page, setMe, signedOut) {
  const account = me.accountId;
  switch (page) {
    case "usage": return html`<${UsagePage} account=${account} fixed=${true} />`;
    case "limits": return html`<${LimitsPage} accountId=${account} />`;
    case "batches": return html`<${BatchesPage} account=${account} />`;
    case "members": return html`<${MembersPage} accountId=${account} accountName=${me.accountName} canManage=${me.role === "owner"} me=${me} />`;
    case "audit": return html`<${AuditPage} account=${account} fixed=${true} />`;
    case "security": return html`<${SecurityPage} me=${me} onChanged=${setMe} onSignedOut=${signedOut} />`;
    default: return html`<${AccountPage} id=${account} me=${me} />`;
  }
}

function operatorPage(me, [page, id, sub], setMe, signedOut) {
  const admin = me.role === "operator-admin";
  if (page === "accounts" && id && sub === "members") return html`<${MembersPage} accountId=${id} canManage=${admin} me=${me} />`;
  if (page === "accounts" && id && sub === "limits") return html`<${LimitsPage} accountId=${id} canSetBudget=${admin} />`;
  if (page === "accounts" && id) return html`<${AccountPage} id=${id} me=${me} />`;
  if (page === "models") return html`<${ModelsPage} />`;
  if (page === "usage") return html`<${UsagePage} account=${id} />`;
  if (page === "batches") return html`<${BatchesPage} account=${id} />`;
  if (page === "audit") return html`<${AuditPage} account=${id} />`;
  if (page === "operators") return html`<${MembersPage} accountId=${null} canManage=${admin} me=${me} />`;
  if (page === "security") return html`<${SecurityPage} me=${me} onChanged=${setMe} onSignedOut=${signedOut} />`;
  return html`<${AccountsPage} canCreate=${admin} />`;
}

function Shell({ me, route, setMe, onLogout, signedOut }) {
  const member = me.kind === "member";
  const sections = member ? memberSections(me) : operatorSections;
  const page = route.parts[0] ?? sections[0][0];
  const content = member ? memberPage(me, page, setMe, signedOut) : operatorPage(me, route.parts, setMe, signedOut);
  return html`<a class="skip" href="#main" onClick=${(e) => { e.preventDefault(); document.getElementById("main")?.focus(); }}>Skip to content</a>
    <header>
      <nav aria-label="Console">
        <span class="brand">Modelgate${member ? html` · ${me.accountName}` : " · operators"}</span>
        <ul>${sections.map(([id, label]) => html`<li><a href=${`#/${id}`} aria-current=${page === id ? "page" : undefined}>${label}</a></li>`)}</ul>
        <span class="who">${me.email} (${me.role})</span>
        <button type="button" onClick=${onLogout}>Sign out</button>
      </nav>
    </header>
    <main id="main" tabindex="-1">${content}</main>`;
}

function App() {
  const route = useRoute();
  const [state, setState] = useState("checking");
  const [me, setMe] = useState(null);
  const signedIn = (session) => {
    setCsrf(session.csrfToken);
    setMe(session.user);
    setState("in");
  };
  const signedOut = (ended = false) => {
    setCsrf(null);
    setMe(null);
    setState(ended ? "ended" : "out");
  };
  useEffect(() => {
    api.session().then(signedIn, () => setState("out"));
    onSessionEnded(() => signedOut(true));
  }, []);
  const [page, token] = route.parts;
  if (state === "checking") return html`<p role="status">Loading…</p>`;
  if ((page === "invite" || page === "reset") && token) return html`<${AcceptInvitePage} token=${token} onSignedIn=${signedIn} />`;
  if (state !== "in") {
    return html`<${SignInPage} onSignedIn=${(s) => { if (page === "signin") location.hash = "#/"; signedIn(s); }} error=${route.query.get("error")}
      note=${state === "ended" ? "Your session has ended: sign in again." : null} />`;
  }
  const logout = async () => {
    await api.logout().catch(() => {});
    signedOut();
  };
  return html`<${Shell} me=${me} route=${route} setMe=${setMe} onLogout=${logout} signedOut=${() => signedOut()} />`;
}

render(html`<${App} />`, document.getElementById("app"));
