import { useEffect, useState } from "preact/hooks";
import { api } from "../api.js";
import { html, Notice } from "../ui.js";

const percent = (x) => `${(100 * x).toFixed(x > 0 && x < 0.01 ? 1 : 0)}%`;

/**
 * Operators: every model with its load state and slots, and the fair share of each (GET /admin/v1/models): the queue
 * by account and each account's share of the model's tokens over the last minute. Refreshes every 5 s.
 */
export function ModelsPage() {
  const [models, setModels] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    const load = () => api.models().then((r) => { setModels(r.data); setError(null); }, setError);
    load();
    const timer = setInterval(load, 5000);
    return () => clearInterval(timer);
  }, []);
  if (!models) return html`<h1>Models</h1><${Notice} error=${error} note=${error ? null : "Loading…"} />`;
  return html`<h1>Models</h1>
    <${Notice} error=${error} />
    <p class="meta">A saturated model is shared between accounts by the tokens each received, divided by its plan's weight. Refreshed every 5 s.</p>
    ${models.map((m) => html`<section class="panel" aria-labelledby=${`model-${m.id}`} data-testid="model">
      <h2 id=${`model-${m.id}`}>${m.id}</h2>
      <p class="meta">${m.engine} · ${m.state} · ${m.active} of ${m.parallel} slots in use · ${m.queueDepth} waiting</p>
      ${m.tenants.length === 0
        ? html`<p>No account has waited for or used this model in the last minute.</p>`
        : html`<table>
            <caption>Queue by account, and share of the last minute's tokens</caption>
            <thead><tr><th scope="col">Account</th><th scope="col">Weight</th><th scope="col">Waiting (interactive / batch)</th><th scope="col">Running</th><th scope="col">Tokens, last minute</th><th scope="col">Share</th></tr></thead>
            <tbody>${m.tenants.map((t) => html`<tr>
              <th scope="row"><a href=${`#/accounts/${encodeURIComponent(t.account)}`}>${t.account}</a></th>
              <td>${t.weight}</td><td>${t.waiting.interactive} / ${t.waiting.batch}</td><td>${t.running}</td><td>${Math.round(t.tokensLastMinute)}</td><td>${percent(t.shareLastMinute)}</td>
            </tr>`)}</tbody>
          </table>`}
    </section>`)}`;
}
