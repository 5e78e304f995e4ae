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
      plot = new UPlot({ width: Math.min(720, ref.current.clientWidth || 720), height: 180, series: [{}, { label, stroke: "#0b5cad", width: 2, points: { show: true } }], axes: [{}, {}] }, [x, values], ref.current);
    });
    return () => {
      cancelled = true;
      plot?.destroy();
    };
  }, [days.join(), values.join()]);
  return html`<figure><div ref=${ref} class="chart" role="img" aria-label=${`${label} per day`}></div><figcaption>${label} per day</figcaption></figure>`;
}

function toCsv(rows) {
  const header = ["day", "account", "key", "model", "requests", "prompt_tokens", "completion_tokens"];
  return [header, ...rows.map((r) => [r.day, r.accountId, r.keyId, r.model, r.requests, r.promptTokens, r.completionTokens])].map((line) => line.join(",")).join("\n") + "\n";
}

export function UsagePage({ account }) {
  const [rows, setRows] = useState([]);
  const [error, setError] = useState(null);
  const [key, setKey] = useState("");
  const [model, setModel] = useState("");
  useEffect(() => {
    api.dailyUsage(account).then((r) => setRows(r.data), setError);
  }, [account]);
  const keys = [...new Set(rows.map((r) => r.keyId))];
  const models = [...new Set(rows.map((r) => r.model))];
  const shown = rows.filter((r) => (!key || r.keyId === key) && (!model || r.model === model));
  const days = [...new Set(shown.map((r) => r.day))].sort();
  const sum = (field) => days.map((d) => shown.filter((r) => r.day === d).reduce((n, r) => n + r[field], 0));
  const download = () => {
    const url = URL.createObjectURL(new Blob([toCsv(shown)], { type: "text/csv" }));
    const a = Object.assign(document.createElement("a"), { href: url, download: `modelgate-usage${account ? `-${account}` : ""}.csv` });
    a.click();
    URL.revokeObjectURL(url);
  };
  return html`<h1>Usage${account ? ` of ${account}` : ""}</h1>
    <div class="filters">
      <div class="field"><label for="usage-key">Key</label>
        <select id="usage-key" value=${key} onChange=${(e) => setKey(e.currentTarget.value)}><option value="">all keys</option>${keys.map((k) => html`<option value=${k}>${k}</option>`)}</select></div>
      <div class="field"><label for="usage-model">Model</label>
        <select id="usage-model" value=${model} onChange=${(e) => setModel(e.currentTarget.value)}><option value="">all models</option>${models.map((m) => html`<option value=${m}>${m}</option>`)}</select></div>
      <button type="button" onClick=${download}>Export CSV</button>
    </div>
    <${Notice} error=${error} note=${rows.length === 0 && !error ? "No usage recorded yet." : null} />
    ${days.length > 0 && metrics.map(([field, label]) => html`<${Chart} days=${days} values=${sum(field)} label=${label} />`)}
    <table>
      <caption>Usage per day, key and model</caption>
      <thead><tr><th scope="col">Day</th><th scope="col">Key</th><th scope="col">Model</th><th scope="col">Requests</th><th scope="col">Prompt tokens</th><th scope="col">Completion tokens</th></tr></thead>
      <tbody>${shown.map((r) => html`<tr><td>${r.day}</td><td>${r.keyId}</td><td>${r.model}</td><td>${r.requests}</td><td>${r.promptTokens}</td><td>${r.completionTokens}</td></tr>`)}</tbody>
    </table>`;
}
