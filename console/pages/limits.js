import { useEffect, useState } from "preact/hooks";
import { api } from "../api.js";
import { html, Notice } from "../ui.js";

const per = (l) => `${l.requests} requests per ${l.windowSeconds >= 60 ? `${l.windowSeconds / 60} min` : `${l.windowSeconds} s`}`;
const bytes = (n) => (n >= 1024 * 1024 ? `${(n / 1024 / 1024).toFixed(0)} MiB` : `${(n / 1024).toFixed(0)} KiB`);

/** The account's plan as it applies to its keys; the token quota and budget appear here once the plan has them. */
export function LimitsPage({ accountId }) {
  const [plan, setPlan] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    api.plan(accountId).then(setPlan, setError);
  }, [accountId]);
  if (!plan) return html`<h1>Plan and limits</h1><${Notice} error=${error} note=${error ? null : "Loading…"} />`;
  const rows = [
    ["Requests per key", per(plan.rateLimit)],
    ["Requests for the whole account", per(plan.accountRateLimit)],
    ["Output tokens per request", plan.maxOutputTokens ?? "the model's context"],
    ["Request body", bytes(plan.maxBodyBytes)],
    ["Audio upload", bytes(plan.maxUploadBytes)],
    ["Models", plan.models.join(", ")],
    ["Endpoints", plan.endpoints.join(", ")],
    ["IP allowlist", plan.ipAllowlist ? "available" : "not in this plan"],
  ];
  return html`<h1>Plan and limits</h1>
    <p class="meta">Plan <strong>${plan.name}</strong>. A key may be narrowed to fewer models and endpoints, never widened.</p>
    <table>
      <caption class="visually-hidden">Limits of the plan</caption>
      <tbody>${rows.map(([name, value]) => html`<tr><th scope="row">${name}</th><td>${value}</td></tr>`)}</tbody>
    </table>
    <section class="panel" aria-labelledby="quota-title" data-testid="quota">
      <h2 id="quota-title">Token quota and budget</h2>
      ${plan.tokenQuota || plan.budget
        ? html`<dl>${plan.tokenQuota && Object.entries(plan.tokenQuota).map(([k, v]) => html`<dt>${k}</dt><dd>${String(v)}</dd>`)}${plan.budget && Object.entries(plan.budget).map(([k, v]) => html`<dt>${k}</dt><dd>${String(v)}</dd>`)}</dl>`
        : html`<p>This plan has no token quota or spending budget: usage is limited by the request rates above.</p>`}
    </section>`;
}
