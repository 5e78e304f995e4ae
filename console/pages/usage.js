import { useEffect, useRef, useState } from "preact/hooks";
import { api } from "../api.js";
import { html, Notice } from "../ui.js";

const metrics = [
  ["requests", "Requests"],
  ["promptTokens", "Prompt tokens"],
  ["completionTokens", "Completion tokens"],
];

/** One line chart per metric over the days (uPlot, loaded only on this page). */
function Chart({ days, values, label }) {
  const ref = useRef(null);
  useEffect(() => {
    let plot = null;
    let cancelled = false;
    import("uplot").then(({ default: UPlot }) => {
      if (cancelled || !ref.current) return;
      const x = days.map((d) => Date.parse(`${d}T00:00:00Z`) / 1000);
      const halfDay = 12 * 60 * 60;
      const options = {
        width: Math.min(720, ref.current.clientWidth || 720),
        height: 180,
        // The table below has the numbers; a legend would repeat them.
        legend: { show: false },
        // Days are UTC midnights: a plain number scale ticks on them (a time scale ticks on local hours), labelled
        // as dates, from the days themselves (uPlot widens a single value). Counts start at 0.
        scales: { x: { time: false, range: () => [x[0] - halfDay, x[x.length - 1] + halfDay] }, y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] } },
        series: [{}, { label, stroke: "#0b5cad", width: 2, points: { show: true, size: 8 } }],
        axes: [{ incrs: [1, 7, 28, 91, 364].map((days) => days * 2 * halfDay), values: (_u, ticks) => ticks.map((t) => new Date(t * 1000).toISOString().slice(0, 10)) }, {}],
      };
      plot = new UPlot(options, [x, values], ref.current);
    });
    return () => {
      cancelled = true;
      plot?.destroy();
    };
  }, [days.join(), values.join()]);
  return html`<figure><div ref=${ref} class="chart" role="img" aria-label=${`${label} per day`}></div><figcaption>${label} per day</figcaption></figure>`;
}

/** RFC 4180: a cell with a comma, quote or line break is quoted. */
const csvCell = (value) => (/[",\r\n]/.test(String(value)) ? `"${String(value).replaceAll('"', '""')}"` : String(value));

function toCsv(rows, keyPrefix) {
  const header = ["day", "account_id", "key_id", "key_prefix", "model", "requests", "prompt_tokens", "completion_tokens", "spend", "currency"];
  const lines = rows.map((r) => [r.day, r.accountId, r.keyId, keyPrefix(r.keyId), r.model, r.requests, r.promptTokens, r.completionTokens, r.spend, r.currency]);
  return [header, ...lines].map((line) => line.map(csvCell).join(",")).join("\n") + "\n";
}

/** A labelled select whose first option means "no filter". */
function Filter({ id, label, value, onChange, all, options }) {
  return html`<div class="field"><label for=${id}>${label}</label>
    <select id=${id} value=${value} onChange=${(e) => onChange(e.currentTarget.value)}>
      <option value="">${all}</option>${options.map(([v, text]) => html`<option value=${v}>${text}</option>`)}
    </select></div>`;
}

/** Usage per day as charts and a table, with CSV; `fixed`: a member's own account, without the account filter. */
export function UsagePage({ account, fixed = false }) {
  const [rows, setRows] = useState([]);
  const [accounts, setAccounts] = useState([]);
  const [keys, setKeys] = useState([]);
  const [error, setError] = useState(null);
  const [key, setKey] = useState("");
  const [model, setModel] = useState("");
  useEffect(() => {
    setKey("");
    api.dailyUsage(account).then((r) => setRows(r.data), setError);
    api.keys(account).then((r) => setKeys(r.data), setError);
  }, [account]);
  useEffect(() => {
    api.accounts().then((r) => setAccounts(r.data), setError);
  }, []);
  const byId = new Map(keys.map((k) => [k.id, k]));
  const keyPrefix = (id) => byId.get(id)?.prefix ?? "";
  const keyLabel = (id) => {
    const k = byId.get(id);
    return k ? `${k.prefix}…${k.name ? ` (${k.name})` : ""}` : id;
  };
  const accountName = accounts.find((a) => a.id === account)?.name ?? account;
  const shown = rows.filter((r) => (!key || r.keyId === key) && (!model || r.model === model));
  const days = [...new Set(shown.map((r) => r.day))].sort();
  const sum = (field) => days.map((d) => shown.filter((r) => r.day === d).reduce((n, r) => n + r[field], 0));
  const download = () => {
    const url = URL.createObjectURL(new Blob([toCsv(shown, keyPrefix)], { type: "text/csv" }));
    const a = Object.assign(document.createElement("a"), { href: url, download: `modelgate-usage${account ? `-${accountName}` : ""}.csv` });
    a.click();
    URL.revokeObjectURL(url);
  };
  const pickAccount = (id) => {
    location.hash = id ? `#/usage/${encodeURIComponent(id)}` : "#/usage";
  };
  return html`<h1>Usage${account && !fixed ? ` of ${accountName}` : ""}</h1>
    <div class="filters">
      ${!fixed && html`<${Filter} id="usage-account" label="Account" value=${account ?? ""} onChange=${pickAccount} all="all accounts" options=${accounts.map((a) => [a.id, a.name])} />`}
      <${Filter} id="usage-key" label="Key" value=${key} onChange=${setKey} all="all keys" options=${[...new Set(rows.map((r) => r.keyId))].map((id) => [id, keyLabel(id)])} />
      <${Filter} id="usage-model" label="Model" value=${model} onChange=${setModel} all="all models" options=${[...new Set(rows.map((r) => r.model))].map((m) => [m, m])} />
      <button type="button" onClick=${download}>Export CSV</button>
    </div>
    <${Notice} error=${error} note=${rows.length === 0 && !error ? "No usage recorded yet." : null} />
    ${days.length > 0 && metrics.map(([field, label]) => html`<${Chart} days=${days} values=${sum(field)} label=${label} />`)}
    <table>
      <caption>Usage per day, key and model</caption>
      <thead><tr><th scope="col">Day</th><th scope="col">Key</th><th scope="col">Model</th><th scope="col">Requests</th><th scope="col">Prompt tokens</th><th scope="col">Completion tokens</th><th scope="col">Spend</th></tr></thead>
      <tbody>${shown.map((r) => html`<tr><td>${r.day}</td><td>${keyLabel(r.keyId)}</td><td>${r.model}</td><td>${r.requests}</td><td>${r.promptTokens}</td><td>${r.completionTokens}</td><td>${r.spend} ${r.currency}</td></tr>`)}</tbody>
    </table>`;
}
