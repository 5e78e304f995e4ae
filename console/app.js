import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, onSessionEnded, setCsrf } from "./api.js";
import { html, Field, Notice } from "./ui.js";
import { AccountsPage } from "./pages/accounts.js";
import { AccountPage } from "./pages/account.js";
import { UsagePage } from "./pages/usage.js";
import { AuditPage } from "./pages/audit.js";

function useRoute() {
  const [hash, setHash] = useState(location.hash || "#/accounts");
  useEffect(() => {
    const onChange = () => setHash(location.hash || "#/accounts");
    addEventListener("hashchange", onChange);
    return () => removeEventListener("hashchange", onChange);
  }, []);
  return hash.slice(2).split("/").map(decodeURIComponent);
}

function Login({ onLogin, ended }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState(null);
  const submit = async (e) => {
    e.preventDefault();
    try {
      const session = await api.login(token);
      setToken("");
      onLogin(session);
    } catch (err) {
      setError(err);
    }
  };
  return html`<main id="main" class="login">
    <h1>Modelgate console</h1>
    <form onSubmit=${submit}>
      <${Field} id="admin-token" label="Admin token" type="password" value=${token} onInput=${setToken} required
        hint="The adminToken of this server's configuration. A login lasts 8 hours." autocomplete="current-password" />
      <${Notice} error=${error} note=${ended ? "Your console login has ended: log in again." : null} />
      <button type="submit" class="primary">Log in</button>
    </form>
  </main>`;
}

const sections = [
  ["accounts", "Accounts"],
  ["usage", "Usage"],
  ["audit", "Audit log"],
];

function Shell({ route, onLogout }) {
  const [page, ...args] = route;
  let content;
  if (page === "accounts" && args[0]) content = html`<${AccountPage} id=${args[0]} />`;
  else if (page === "usage") content = html`<${UsagePage} account=${args[0]} />`;
  else if (page === "audit") content = html`<${AuditPage} account=${args[0]} />`;
  else content = html`<${AccountsPage} />`;
  return html`<a class="skip" href="#main" onClick=${(e) => { e.preventDefault(); document.getElementById("main")?.focus(); }}>Skip to content</a>
    <header>
      <nav aria-label="Console">
        <span class="brand">Modelgate</span>
        <ul>${sections.map(([id, label]) => html`<li><a href=${`#/${id}`} aria-current=${page === id ? "page" : undefined}>${label}</a></li>`)}</ul>
        <button type="button" onClick=${onLogout}>Log out</button>
      </nav>
    </header>
    <main id="main" tabindex="-1">${content}</main>`;
}

function App() {
  const route = useRoute();
  const [state, setState] = useState("checking");
  useEffect(() => {
    api.session().then((s) => {
      setCsrf(s.csrfToken);
      setState("in");
    }, () => setState("out"));
    onSessionEnded(() => {
      setCsrf(null);
      setState("ended");
    });
  }, []);
  if (state === "checking") return html`<p role="status">Loading…</p>`;
  if (state !== "in") return html`<${Login} ended=${state === "ended"} onLogin=${(s) => { setCsrf(s.csrfToken); setState("in"); }} />`;
  const logout = async () => {
    await api.logout().catch(() => {});
    setCsrf(null);
    setState("out");
  };
  return html`<${Shell} route=${route} onLogout=${logout} />`;
}

render(html`<${App} />`, document.getElementById("app"));
