import { useEffect, useState } from "preact/hooks";
import { api } from "../api.js";
import { html, Confirm, Field, Notice, formatDate } from "../ui.js";

const memberRoles = ["owner", "developer", "viewer"];
const operatorRoles = ["operator-admin", "operator-viewer"];

/** A one-time link (invite or password reset), shown this once with a copy button. */
function OnceLink({ link, onDone }) {
  const [copied, setCopied] = useState(null);
  const url = link.url ?? `${location.origin}${link.path}`;
  const copy = () => navigator.clipboard.writeText(url).then(() => setCopied("Copied to the clipboard."), () => setCopied("Select the link and copy it."));
  return html`<section class="once" aria-labelledby="link-title" tabindex="-1" ref=${(el) => el?.focus()}>
    <h2 id="link-title">${link.purpose === "reset" ? `Password reset link${link.clearsTotp ? ", clearing two-factor sign-in" : ""}` : `Invite for ${link.email}`}</h2>
    <p><strong>Send this link to ${link.email} now: you will not see it again.</strong> It works once, until ${formatDate(link.expiresAt)}.</p>
    <p class="key-line"><code data-testid="invite-link">${url}</code> <button type="button" onClick=${copy}>Copy link</button> <span role="status">${copied}</span></p>
    <button type="button" onClick=${onDone}>Done</button>
  </section>`;
}

/**
 * The people of an account (accountId), or the operators (accountId null): their roles, the invites and reset links
 * not yet used, and, for whoever may manage them (an owner, an operator-admin), invite, change a role, send a reset
 * link, withdraw a link, remove. Only an operator's reset may also clear a user's two-factor sign-in.
 */
export function MembersPage({ accountId, accountName, canManage, me }) {
  const roles = accountId ? memberRoles : operatorRoles;
  const operator = me.kind === "operator";
  const [list, setList] = useState(null);
  const [error, setError] = useState(null);
  const [form, setForm] = useState({ email: "", role: roles[1] ?? roles[0] });
  const [link, setLink] = useState(null);
  const [removing, setRemoving] = useState(null);
  const load = () => api.users(accountId).then(setList, setError);
  useEffect(() => { load(); }, [accountId]);
  const act = (fn) => async (e) => {
    e?.preventDefault();
    setError(null);
    try {
      await fn();
      await load();
    } catch (err) {
      setError(err);
    }
  };
  const invite = act(async () => {
    setLink(await api.invite(accountId, form));
    setForm({ ...form, email: "" });
  });
  const title = accountId ? `Members${accountName ? ` of ${accountName}` : ""}` : "Operators";
  return html`<h1>${title}</h1>
    ${link && html`<${OnceLink} link=${link} onDone=${() => setLink(null)} />`}
    <${Notice} error=${error} note=${list === null && !error ? "Loading…" : null} />
    ${list && list.data.length === 0 && html`<p>No one yet${canManage ? ": invite the first one below" : ""}.</p>`}
    ${list && list.data.length > 0 && html`<table>
      <caption class="visually-hidden">${title}</caption>
      <thead><tr><th scope="col">Email</th><th scope="col">Role</th><th scope="col">Two-factor</th><th scope="col">Since</th>${canManage && html`<th scope="col">Actions</th>`}</tr></thead>
      <tbody>${list.data.map((u) => html`<tr>
        <th scope="row">${u.email}${u.id === me.id ? " (you)" : ""}</th>
        <td>${canManage && u.id !== me.id
          ? html`<label class="visually-hidden" for=${`role-${u.id}`}>Role of ${u.email}</label>
            <select id=${`role-${u.id}`} value=${u.role} onChange=${(e) => act(() => api.setRole(u.id, e.currentTarget.value))()}>${roles.map((r) => html`<option value=${r}>${r}</option>`)}</select>`
          : u.role}</td>
        <td>${u.totpEnabled ? "on" : "off"}</td><td>${formatDate(u.createdAt)}</td>
        ${canManage && html`<td>${u.id !== me.id && html`<button type="button" onClick=${act(async () => setLink(await api.resetLink(u.id)))} aria-label=${`Password reset link for ${u.email}`}>Reset link</button>
          ${operator && u.totpEnabled && html`<button type="button" onClick=${act(async () => setLink({ ...(await api.resetLink(u.id, true)), clearsTotp: true }))} aria-label=${`Password reset link for ${u.email}, clearing two-factor sign-in`}>Reset and clear two-factor</button>`}
          <button type="button" class="danger" onClick=${() => setRemoving(u)} aria-label=${`Remove ${u.email}`}>Remove</button>`}</td>`}
      </tr>`)}</tbody>
    </table>`}
    ${list && list.invites.length > 0 && html`<h2>Open invites</h2><table>
      <caption class="visually-hidden">Invites not yet used</caption>
      <thead><tr><th scope="col">Email</th><th scope="col">Role</th><th scope="col">Expires</th><th scope="col">Invited by</th>${canManage && html`<th scope="col">Actions</th>`}</tr></thead>
      <tbody>${list.invites.map((i) => html`<tr><th scope="row">${i.email}</th><td>${i.role}</td><td>${formatDate(i.expiresAt)}</td><td>${i.createdByEmail ?? "admin token or CLI"}</td>
        ${canManage && html`<td><button type="button" onClick=${act(() => api.withdrawInvite(i.id))} aria-label=${`Withdraw the invite for ${i.email}`}>Withdraw</button></td>`}</tr>`)}</tbody>
    </table>`}
    ${list && list.resetLinks.length > 0 && html`<h2>Pending reset links</h2><table data-testid="reset-links">
      <caption class="visually-hidden">Password-reset links not yet used</caption>
      <thead><tr><th scope="col">For</th><th scope="col">Expires</th><th scope="col">Made by</th><th scope="col">Two-factor</th>${canManage && html`<th scope="col">Actions</th>`}</tr></thead>
      <tbody>${list.resetLinks.map((r) => html`<tr><th scope="row">${r.email}</th><td>${formatDate(r.expiresAt)}</td><td>${r.createdByEmail ?? "admin token or CLI"}</td><td>${r.clearsTotp ? "cleared on use" : "asked on use"}</td>
        ${canManage && html`<td><button type="button" onClick=${act(() => api.withdrawInvite(r.id))} aria-label=${`Withdraw the reset link for ${r.email}`}>Withdraw</button></td>`}</tr>`)}</tbody>
    </table>`}
    ${canManage && html`<form class="panel" onSubmit=${invite} aria-labelledby="invite-title">
      <h2 id="invite-title">Invite ${accountId ? "a member" : "an operator"}</h2>
      <${Field} id="invite-email" label="Email" type="email" value=${form.email} onInput=${(v) => setForm({ ...form, email: v })} required />
      <div class="field"><label for="invite-role">Role</label>
        <select id="invite-role" value=${form.role} onChange=${(e) => setForm({ ...form, role: e.currentTarget.value })} aria-describedby="invite-role-hint">${roles.map((r) => html`<option value=${r}>${r}</option>`)}</select>
        <p class="hint" id="invite-role-hint">${accountId ? "Viewers read only; developers also manage keys; owners also manage members." : "Operator-viewers read every account; operator-admins also change them."}</p></div>
      <button type="submit" class="primary">Create invite link</button>
    </form>`}
    <${Confirm} open=${removing !== null} title="Remove this person?" confirmLabel="Remove" onConfirm=${() => { const u = removing; setRemoving(null); act(() => api.removeUser(u.id))(); }} onCancel=${() => setRemoving(null)}>
      <p>${removing?.email} is signed out everywhere and can no longer sign in. Their entries stay in the audit log.</p>
    </${Confirm}>`;
}
