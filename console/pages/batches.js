import { useEffect, useState } from "preact/hooks";
import { api } from "../api.js";
import { html, Notice } from "../ui.js";

const running = new Set(["validating", "in_progress", "finalizing", "cancelling"]);

/** A batch's progress: lines done (completed or failed) of its total, as a bar and a count. */
function Progress({ b }) {
  const done = b.completed + b.failed;
  const label = `${done} of ${b.total} lines${b.failed ? ` (${b.failed} failed)` : ""}`;
  return html`<progress max=${Math.max(1, b.total)} value=${done} aria-label=${label}></progress> <span>${label}</span>`;
}

/** The Batch API batches of an account (every account's for operators), newest first, refreshed while one runs. */
export function BatchesPage({ account }) {
  const [batches, setBatches] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    let timer = null;
    let stopped = false;
    const load = () =>
      api.batches(account).then(
        (r) => {
          if (stopped) return;
          setBatches(r.data);
          if (r.data.some((b) => running.has(b.status))) timer = setTimeout(load, 3000);
        },
        setError,
      );
    load();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [account]);
  if (!batches) return html`<h1>Batches</h1><${Notice} error=${error} note=${error ? null : "Loading…"} />`;
  return html`<h1>Batches</h1>
    <p class="meta">Batch API jobs (<code>POST /v1/batches</code>), newest first; the list refreshes while one runs.</p>
    ${batches.length === 0
      ? html`<p>No batches yet.</p>`
      : html`<table data-testid="batches">
          <caption class="visually-hidden">Batches</caption>
          <thead><tr><th scope="col">Batch</th><th scope="col">Endpoint</th><th scope="col">Status</th><th scope="col">Progress</th><th scope="col">Created</th><th scope="col">Ended</th></tr></thead>
          <tbody>${batches.map(
            (b) => html`<tr>
              <td><code>${b.id}</code></td><td><code>${b.endpoint}</code></td><td>${b.status.replace("_", " ")}</td>
              <td><${Progress} b=${b} /></td><td>${b.createdAt.slice(0, 19).replace("T", " ")}</td><td>${b.endedAt ? b.endedAt.slice(0, 19).replace("T", " ") : "—"}</td>
            </tr>`,
          )}</tbody>
        </table>`}`;
}
