import { useEffect, useState } from "preact/hooks";
import { api } from "../api.js";
import { html, Notice } from "../ui.js";

const percent = (x) => `${(100 * x).toFixed(x > 0 && x < 0.01 ? 1 : 0)}%`;

const reasonWords = { unavailable: "unavailable", overloaded: "overloaded", upstream_error: "upstream error", context_window: "prompt too long" };

/** One route (GET /admin/v1/routes): its split and fallbacks, with what each served and the fallbacks of the last minute. */
function RoutePanel({ route }) {
  const rows = [
    ...route.targets.map((t) => ({ model: t.model, role: `${percent(t.share)} of new conversations (weight ${t.weight})`, state: t.state, served: t.servedLastMinute })),
    ...route.fallbacks.map((f, i) => ({ model: f.model, role: `fallback ${i + 1}`, state: f.state, served: f.servedLastMinute })),
  ];
  const fellBack = route.fallbacksLastMinute.reduce((n, f) => n + f.count, 0);
  return html`<section class="panel" aria-labelledby=${`route-${route.id}`} data-testid="route">
    <h2 id=${`route-${route.id}`}>${route.id}</h2>
    <p class="meta">route · falls back when ${route.fallbackOn.map((r) => reasonWords[r]).join(", ") || "never"} · ${fellBack} fallbacks in the last minute</p>
    <table>
      <caption>Split and fallbacks, with the requests each answered in the last minute</caption>
      <thead><tr><th scope="col">Model</th><th scope="col">Role</th><th scope="col">State</th><th scope="col">Answered, last minute</th></tr></thead>
      <tbody>${rows.map((r) => html`<tr><th scope="row">${r.model}</th><td>${r.role}</td><td>${r.state}</td><td>${r.served}</td></tr>`)}</tbody>
    </table>
    ${route.fallbacksLastMinute.length > 0 && html`<ul class="meta">${route.fallbacksLastMinute.map((f) => html`<li>${f.count} from ${f.from}: ${reasonWords[f.reason]}</li>`)}</ul>`}
  </section>`;
}

/**
 * Operators: every model with its load state and slots, and the fair share of each (GET /admin/v1/models): the queue
 * by account and each account's share of the model's tokens over the last minute; then each route's split and
 * fallbacks (GET /admin/v1/routes). Refreshes every 5 s.
 */
export function ModelsPage() {
  const [models, setModels] = useState(null);
  const [routes, setRoutes] = useState([]);
  const [error, setError] = useState(null);
  useEffect(() => {
    const load = () =>
      Promise.all([api.models(), api.routes()]).then(([m, r]) => {
        setModels(m.data);
        setRoutes(r.data);
        setError(null);
      }, setError);
    load();
    const timer = setInterval(load, 5000);
    return () => clearInterval(timer);
  }, []);
  if (!models) return html`<h1>Models</h1><${Notice} error=${error} note=${error ? null : "Loading…"} />`;
  return html`<h1>Models</h1>
    <${Notice} error=${error} />
    <p class="meta">A saturated model is shared between accounts by the tokens each received, divided by its plan's weight. Refreshed every 5 s.</p>
    ${routes.map((route) => html`<${RoutePanel} route=${route} />`)}
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
