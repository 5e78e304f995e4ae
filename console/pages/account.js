import { useEffect, useState } from "preact/hooks";
import { api, splitList } from "../api.js";
import { html, Confirm, Field, Notice, OnceKey, formatDate } from "../ui.js";

const endpointNames = ["chat", "embeddings", "transcriptions", "rerank", "models"];

function Settings({ account, onSaved, onBehalfOf }) {
  const [form, setForm] = useState({ plan: account.plan, contacts: account.contacts.join(", "), allowIps: account.allowIps.join(", ") });
  const [error, setError] = useState(null);
  const [note, setNote] = useState(null);
  const set = (field) => (value) => setForm({ ...form, [field]: value });
  const save = async (e) => {
    e.preventDefault();
    setError(null);
    setNote(null);
    try {
      const saved = await api.updateAccount(account.id, { plan: form.plan, contacts: splitList(form.contacts), allowIps: splitList(form.allowIps) }, onBehalfOf);
      setNote("Saved.");
      onSaved(saved);
    } catch (err) {
      setError(err);
    }
  };
  return html`<form class="panel" onSubmit=${save} aria-labelledby="settings-title">
    <h2 id="settings-title">Plan, contacts and IP allowlist</h2>
    <${Field} id="settings-plan" label="Plan" value=${form.plan} onInput=${set("plan")} required />
    <${Field} id="settings-contacts" label="Contact addresses" value=${form.contacts} onInput=${set("contacts")} hint="Comma-separated emails." />
    <${Field} id="settings-allow" label="IP allowlist" value=${form.allowIps} onInput=${set("allowIps")}
      hint="Comma-separated CIDRs, IPv4 or IPv6 (10.0.0.0/8, 2001:db8::/32); empty: any address. The plan must allow allowlists." />
    <${Notice} error=${error} note=${note} />
    <button type="submit" class="primary">Save account</button>
  </form>`;
}

function NewKey({ account, onCreated, onBehalfOf, operator, endpoints = endpointNames }) {
  const [form, setForm] = useState({ name: "", models: "", deployment: "", endpoints: [] });
  const [error, setError] = useState(null);
  const set = (field) => (value) => setForm({ ...form, [field]: value });
  const toggle = (endpoint) => setForm({ ...form, endpoints: form.endpoints.includes(endpoint) ? form.endpoints.filter((e) => e !== endpoint) : [...form.endpoints, endpoint] });
  const create = async (e) => {
    e.preventDefault();
    setError(null);
    try {
      const models = splitList(form.models);
      const created = await api.createKey(
        { account: account.id, name: form.name || null, models: models.length ? models : null, endpoints: form.endpoints.length ? form.endpoints : null, deployment: form.deployment || null },
        onBehalfOf,
      );
      setForm({ name: "", models: "", deployment: "", endpoints: [] });
      onCreated(created);
    } catch (err) {
      setError(err);
    }
  };
  return html`<form class="panel" onSubmit=${create} aria-labelledby="new-key-title">
    <h2 id="new-key-title">New key</h2>
    <${Field} id="key-name" label="Key name" value=${form.name} onInput=${set("name")} />
    <${Field} id="key-models" label="Model globs" value=${form.models} onInput=${set("models")} hint="Comma-separated (qwen*, stories); empty: every model of the plan." />
    <fieldset><legend>Endpoints (none checked: every endpoint of the plan)</legend>
      ${endpoints.map((name) => html`<label class="check"><input type="checkbox" checked=${form.endpoints.includes(name)} onChange=${() => toggle(name)} /> ${name}</label>`)}
    </fieldset>
    ${operator && html`<${Field} id="key-deployment" label="Deployment" value=${form.deployment} onInput=${set("deployment")} hint="Empty: the shared deployment." />`}
    <${Notice} error=${error} />
    <button type="submit" class="primary">Create key</button>
  </form>`;
}

/**
 * One account's keys (and, for operators, its settings). `me` decides what shows: operators see every account and,
 * as operator-admins, change them; members see their own, developers and owners manage keys, viewers only read.
 */
export function AccountPage({ id, me }) {
  const operator = me.kind === "operator";
  const canManageKeys = operator ? me.role === "operator-admin" : me.role !== "viewer";
  const [plan, setPlan] = useState(null);
  const [account, setAccount] = useState(null);
  const [keys, setKeys] = useState([]);
  const [error, setError] = useState(null);
  const [shown, setShown] = useState(null);
  const [revoking, setRevoking] = useState(null);
  const [onBehalfOf, setOnBehalfOf] = useState("");
  const loadKeys = () => api.keys(id).then((r) => setKeys(r.data), setError);
  useEffect(() => {
    api.account(id).then(setAccount, setError);
    api.plan(id).then(setPlan, () => {});
    loadKeys();
  }, [id]);
  if (!account) return html`<${Notice} error=${error} note=${error ? null : "Loading…"} />`;

  const rotate = async (key) => {
    setError(null);
    try {
      const created = await api.rotateKey(key.id, onBehalfOf);
      setShown({ created, rotatedFrom: key });
      loadKeys();
    } catch (err) {
      setError(err);
    }
  };
  const revoke = async () => {
    const key = revoking;
    setRevoking(null);
    setError(null);
    try {
      await api.revokeKey(key.id, onBehalfOf);
      // The new key stays on screen until acknowledged; only the prompt to revoke the old one goes.
      if (shown?.rotatedFrom?.id === key.id) setShown({ created: shown.created });
      await loadKeys();
      // The button that opened the dialog is gone with the revoked key: keep the focus somewhere useful.
      (document.querySelector(".once") ?? document.getElementById("keys-title"))?.focus();
    } catch (err) {
      setError(err);
    }
  };
  return html`<h1>${operator ? `Account ${account.name}` : "API keys"}</h1>
    ${operator
      ? html`<p class="meta">${account.id} · plan ${account.plan} · <a href=${`#/usage/${encodeURIComponent(account.id)}`}>Usage of this account</a> · <a href=${`#/audit/${encodeURIComponent(account.id)}`}>Audit log of this account</a> · <a href=${`#/accounts/${encodeURIComponent(account.id)}/members`}>Members</a> · <a href=${`#/accounts/${encodeURIComponent(account.id)}/limits`}>Plan and limits</a></p>
        <div class="field">
          <label for="on-behalf-of">Acting on behalf of (optional)</label>
          <select id="on-behalf-of" value=${onBehalfOf} onChange=${(e) => setOnBehalfOf(e.currentTarget.value)} aria-describedby="on-behalf-hint">
            <option value="">nobody: my own operation</option>
            ${account.contacts.map((c) => html`<option value=${c}>${c}</option>`)}
          </select>
          <p class="hint" id="on-behalf-hint">For support acting on a request from one of the account's registered contacts; it goes into the audit log.</p>
        </div>`
      : html`<p class="meta">Account ${account.name} · plan ${account.plan}${canManageKeys ? "" : " · you can read, not change (viewer)"}</p>`}
    ${shown && html`<${OnceKey} created=${shown.created} title=${shown.rotatedFrom ? "Rotated: the new key" : "New key"} onDone=${() => setShown(null)}>
      ${shown.rotatedFrom && html`<p>The old key <code>${shown.rotatedFrom.prefix}…</code> still works. Move your traffic to the new key, then
        <button type="button" class="danger" onClick=${() => setRevoking(shown.rotatedFrom)}>Revoke the old key</button></p>`}
    </${OnceKey}>`}
    <${Notice} error=${error} />
    <h2 id="keys-title" tabindex="-1">Keys</h2>
    <table>
      <caption class="visually-hidden">Keys of ${account.name}</caption>
      <thead><tr><th scope="col">Prefix</th><th scope="col">Name</th><th scope="col">Scopes</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">State</th>${canManageKeys && html`<th scope="col">Actions</th>`}</tr></thead>
      <tbody>${keys.map((k) => html`<tr>
        <th scope="row"><code>${k.prefix}…</code></th>
        <td>${k.name ?? "—"}</td>
        <td>models ${k.models?.join(", ") ?? "all"}; endpoints ${k.endpoints?.join(", ") ?? "all"}${k.deployment ? `; deployment ${k.deployment}` : ""}</td>
        <td>${formatDate(k.createdAt)}</td><td>${formatDate(k.lastUsedAt)}</td>
        <td>${k.revokedAt ? `revoked ${formatDate(k.revokedAt)}` : "active"}</td>
        ${canManageKeys && html`<td>${!k.revokedAt && html`<button type="button" onClick=${() => rotate(k)} aria-label=${`Rotate key ${k.prefix}`}>Rotate</button>
          <button type="button" class="danger" onClick=${() => setRevoking(k)} aria-label=${`Revoke key ${k.prefix}`}>Revoke</button>`}</td>`}
      </tr>`)}</tbody>
    </table>
    ${canManageKeys && html`<${NewKey} account=${account} onBehalfOf=${onBehalfOf} operator=${operator} endpoints=${operator ? endpointNames : plan?.endpoints ?? endpointNames}
      onCreated=${(created) => { setShown({ created }); loadKeys(); }} />`}
    ${operator && me.role === "operator-admin" && html`<${Settings} account=${account} onBehalfOf=${onBehalfOf} onSaved=${setAccount} />`}
    <${Confirm} open=${revoking !== null} title="Revoke this key?" confirmLabel="Revoke key" onConfirm=${revoke} onCancel=${() => setRevoking(null)}>
      <p>Key <code>${revoking?.prefix}…</code> stops working on every replica at once. This cannot be undone.</p>
    </${Confirm}>`;
}
