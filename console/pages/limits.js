import { useEffect, useState } from "preact/hooks";
import { api } from "../api.js";
import { html, Notice } from "../ui.js";

const per = (l) => `${l.requests} requests per ${l.windowSeconds >= 60 ? `${l.windowSeconds / 60} min` : `${l.windowSeconds} s`}`;
const bytes = (n) => (n >= 1024 * 1024 ? `${(n / 1024 / 1024).toFixed(0)} MiB` : `${(n / 1024).toFixed(0)} KiB`);

const tokensPer = (l) => `${l.tokens.toLocaleString("en")} tokens per ${l.windowSeconds >= 60 ? `${l.windowSeconds / 60} min` : `${l.windowSeconds} s`}`;

/** An operator-admin sets the account's own budget (audited), or goes back to the plan's. */
function BudgetForm({ accountId, budget, onSaved }) {
  const [amount, setAmount] = useState(budget ? budget.amount : "");
  const [period, setPeriod] = useState(budget ? budget.period : "month");
  const [error, setError] = useState(null);
  const save = (body) => api.updateAccount(accountId, { budget: body }).then(onSaved, setError);
  return html`<form class="inline" onSubmit=${(e) => {
      e.preventDefault();
      save({ amount: amount.trim(), period });
    }}>
    <h3>The account's own budget</h3>
    <div class="field"><label for="budget-amount">Amount</label><input id="budget-amount" inputmode="decimal" required pattern="[0-9]+(\.[0-9]{1,6})?" value=${amount} onInput=${(e) => setAmount(e.currentTarget.value)} /></div>
    <div class="field"><label for="budget-period">Period</label>
      <select id="budget-period" value=${period} onChange=${(e) => setPeriod(e.currentTarget.value)}><option value="day">day (UTC)</option><option value="month">month (UTC)</option></select></div>
    <button type="submit">Set budget</button>
    ${budget?.source === "account" && html`<button type="button" onClick=${() => save(null)}>Use the plan's budget</button>`}
    <${Notice} error=${error} />
  </form>`;
}

/** The account's plan as it applies to its keys, with its token limits, quota and budget and what is left of them. */
export function LimitsPage({ accountId, canSetBudget = false }) {
  const [plan, setPlan] = useState(null);
  const [error, setError] = useState(null);
  const load = () => api.plan(accountId).then(setPlan, setError);
  useEffect(() => {
    load();
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
    ["Tokens per key", plan.tokenLimit ? tokensPer(plan.tokenLimit) : "no token limit"],
    ["Tokens for the whole account", plan.accountTokenLimit ? tokensPer(plan.accountTokenLimit) : "no token limit"],
  ];
  const quota = plan.tokenQuota;
  const budget = plan.budget;
  return html`<h1>Plan and limits</h1>
    <p class="meta">Plan <strong>${plan.name}</strong>. A key may be narrowed to fewer models and endpoints, never widened.</p>
    <table>
      <caption class="visually-hidden">Limits of the plan</caption>
      <tbody>${rows.map(([name, value]) => html`<tr><th scope="row">${name}</th><td>${value}</td></tr>`)}</tbody>
    </table>
    <section class="panel" aria-labelledby="quota-title" data-testid="quota">
      <h2 id="quota-title">Token quota and budget</h2>
      ${quota || budget
        ? html`<dl>
            ${quota && html`<dt>Token quota</dt><dd>${quota.tokens.toLocaleString("en")} tokens per ${quota.period} (UTC): <strong>${quota.left.toLocaleString("en")} left</strong>, ${quota.used.toLocaleString("en")} used; resets ${quota.resetsAt}</dd>`}
            ${budget && html`<dt>Budget${budget.source === "account" ? " (this account's own)" : ""}</dt><dd>${budget.amount} ${budget.currency} per ${budget.period} (UTC): <strong>${budget.left} ${budget.currency} left</strong>, ${budget.spent} spent; resets ${budget.resetsAt}</dd>`}
          </dl>`
        : html`<p>This plan has no token quota or spending budget: usage is limited by the request rates above.</p>`}
      ${canSetBudget && html`<${BudgetForm} accountId=${accountId} budget=${budget} onSaved=${load} />`}
    </section>`;
}
