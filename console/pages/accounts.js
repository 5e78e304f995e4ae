import { useEffect, useState } from "preact/hooks";
import { api, splitList } from "../api.js";
import { html, Field, Notice, formatDate } from "../ui.js";

export function AccountsPage({ canCreate }) {
  const [accounts, setAccounts] = useState([]);
  const [search, setSearch] = useState("");
  const [error, setError] = useState(null);
  const [form, setForm] = useState({ name: "", plan: "", contacts: "", onBehalfOf: "" });
  const load = () => api.accounts().then((r) => setAccounts(r.data), setError);
  useEffect(() => { load(); }, []);

  const create = async (e) => {
    e.preventDefault();
    setError(null);
    try {
      const account = await api.createAccount({ name: form.name, ...(form.plan ? { plan: form.plan } : {}), contacts: splitList(form.contacts) }, form.onBehalfOf);
      location.hash = `#/accounts/${encodeURIComponent(account.id)}`;
    } catch (err) {
      setError(err);
    }
  };
  const set = (field) => (value) => setForm({ ...form, [field]: value });
  const needle = search.trim().toLowerCase();
  const shown = accounts.filter((a) => !needle || [a.name, a.id, a.plan, ...a.contacts].some((v) => v.toLowerCase().includes(needle)));
  return html`<h1>Accounts</h1>
    <div class="field search">
      <label for="account-search">Search accounts</label>
      <input id="account-search" type="search" value=${search} onInput=${(e) => setSearch(e.currentTarget.value)} aria-describedby="account-count" />
      <p class="hint" id="account-count" role="status">${shown.length} of ${accounts.length} accounts</p>
    </div>
    <table>
      <caption class="visually-hidden">Accounts</caption>
      <thead><tr><th scope="col">Name</th><th scope="col">Plan</th><th scope="col">Contacts</th><th scope="col">IP allowlist</th><th scope="col">Created</th></tr></thead>
      <tbody>${shown.map((a) => html`<tr>
        <th scope="row"><a href=${`#/accounts/${encodeURIComponent(a.id)}`}>${a.name}</a></th>
        <td>${a.plan}</td><td>${a.contacts.join(", ") || "none"}</td><td>${a.allowIps.join(", ") || "any address"}</td><td>${formatDate(a.createdAt)}</td>
      </tr>`)}</tbody>
    </table>
    ${canCreate && html`<form class="panel" onSubmit=${create} aria-labelledby="new-account">
      <h2 id="new-account">New account</h2>
      <${Field} id="account-name" label="Name" value=${form.name} onInput=${set("name")} required hint="Letters, digits, . _ @ -; up to 64." />
      <${Field} id="account-plan" label="Plan" value=${form.plan} onInput=${set("plan")} hint="Empty: the default plan." />
      <${Field} id="account-contacts" label="Contact addresses" value=${form.contacts} onInput=${set("contacts")} hint="Comma-separated emails; support acts only on requests from these." />
      <${Field} id="account-on-behalf" label="On behalf of (optional)" value=${form.onBehalfOf} onInput=${set("onBehalfOf")} hint="The contact who asked for this, for the audit log." />
      <${Notice} error=${error} />
      <button type="submit" class="primary">Create account</button>
    </form>`}`;
}
