import { useEffect, useState } from "preact/hooks";
import { api } from "../api.js";
import { html, Notice, formatDate } from "../ui.js";

const actions = ["account.create", "account.update", "key.create", "key.rotate", "key.revoke", "member.invite", "member.join", "member.role", "member.remove", "operator.invite", "operator.join", "operator.role", "operator.remove", "operator.email", "operator.oidc_link", "user.totp.enable", "user.totp.disable", "user.totp.clear", "user.password_reset_link", "user.password_reset", "link.withdraw", "auth.login", "auth.oidc_conflict", "auth.failed", "auth.failed.summary"];
const actors = ["member", "operator", "cli", "admin-token", "anonymous", "console"];

/** Newest first, filtered; `fixed`: a member's own account, without the account filter. */
export function AuditPage({ account, fixed = false }) {
  const [filter, setFilter] = useState({ account: account ?? "", action: "", actor: "" });
  const [entries, setEntries] = useState([]);
  const [names, setNames] = useState(new Map());
  const [error, setError] = useState(null);
  useEffect(() => {
    setError(null);
    api.audit(filter).then((r) => setEntries(r.data), setError);
  }, [filter.account, filter.action, filter.actor]);
  useEffect(() => {
    api.accounts().then((r) => setNames(new Map(r.data.map((a) => [a.id, a.name]))), setError);
  }, []);
  useEffect(() => {
    if (fixed) setFilter((f) => ({ ...f, account: account ?? "" }));
  }, [account]);
  const accountOf = (id) => (id ? `${names.get(id) ?? ""} ${id}`.trim() : "—");
  // Key entries carry the display prefix (never the value), which is what people recognise a key by.
  const keyOf = (e) => (e.keyId ? `${e.keyId}${e.detail?.prefix ? ` (${e.detail.prefix}…)` : ""}` : "—");
  const set = (field) => (e) => setFilter({ ...filter, [field]: e.currentTarget.value });
  return html`<h1>Audit log</h1>
    <p class="hint">${fixed ? "Every operation on this account: keys, members, sign-ins, by whom and from where." : "Every account, key and member operation, from the console, the CLI and the admin API, and the sign-ins and failed attempts (auth.*)."} Append-only.</p>
    <div class="filters">
      ${!fixed && html`<div class="field"><label for="audit-account">Account (name or id)</label>
        <input id="audit-account" type="search" value=${filter.account} onChange=${set("account")} /></div>`}
      <div class="field"><label for="audit-action">Action</label>
        <select id="audit-action" value=${filter.action} onChange=${set("action")}><option value="">all actions</option>${actions.map((a) => html`<option value=${a}>${a}</option>`)}</select></div>
      <div class="field"><label for="audit-actor">Actor</label>
        <select id="audit-actor" value=${filter.actor} onChange=${set("actor")}><option value="">all actors</option>${actors.map((a) => html`<option value=${a}>${a}</option>`)}</select></div>
    </div>
    <${Notice} error=${error} />
    <table>
      <caption class="visually-hidden">Audit entries, newest first</caption>
      <thead><tr><th scope="col">Time</th><th scope="col">Actor</th><th scope="col">On behalf of</th><th scope="col">Action</th><th scope="col">Account</th><th scope="col">Key</th><th scope="col">Source</th></tr></thead>
      <tbody>${entries.map((e) => html`<tr data-action=${e.action}>
        <td class="nowrap">${formatDate(e.at)}</td><td>${e.actorEmail ? `${e.actor} ${e.actorEmail}` : e.actor}</td><td>${e.onBehalfOf ?? "—"}</td><td>${e.action}</td>
        <td>${accountOf(e.accountId)}</td><td>${keyOf(e)}</td><td>${e.source ?? "—"}</td>
      </tr>`)}</tbody>
    </table>`;
}
