import { h } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import htm from "htm";

export const html = htm.bind(h);

/** A message for screen readers and eyes alike: errors are announced at once (role=alert), notes politely. */
export function Notice({ error, note }) {
  if (error) return html`<p class="notice error" role="alert">${error.message}${error.param ? html` <span class="param">(${error.param})</span>` : ""}</p>`;
  if (note) return html`<p class="notice" role="status">${note}</p>`;
  return null;
}

/** A labelled text field; `hint` is tied to it with aria-describedby. */
export function Field({ id, label, value, onInput, hint, type = "text", required = false, autocomplete = "off" }) {
  return html`<div class="field">
    <label for=${id}>${label}</label>
    <input id=${id} type=${type} value=${value} required=${required} autocomplete=${autocomplete}
      aria-describedby=${hint ? `${id}-hint` : undefined} onInput=${(e) => onInput(e.currentTarget.value)} />
    ${hint && html`<p class="hint" id=${`${id}-hint`}>${hint}</p>`}
  </div>`;
}

/**
 * A modal confirmation on the native <dialog> (focus is trapped and Escape cancels). Focus starts on Cancel, so an
 * Enter pressed out of habit never confirms a destructive action.
 */
export function Confirm({ open, title, children, confirmLabel, onConfirm, onCancel }) {
  const ref = useRef(null);
  useEffect(() => {
    const dialog = ref.current;
    if (open && !dialog.open) dialog.showModal();
    if (!open && dialog.open) dialog.close();
  }, [open]);
  return html`<dialog ref=${ref} aria-labelledby="confirm-title" onCancel=${(e) => { e.preventDefault(); onCancel(); }}>
    <h2 id="confirm-title">${title}</h2>
    ${children}
    <div class="actions">
      <button type="button" class="danger" onClick=${onConfirm}>${confirmLabel}</button>
      <button type="button" onClick=${onCancel} autofocus>Cancel</button>
    </div>
  </dialog>`;
}

/**
 * A key value shown once: the only place the console ever renders one. It takes the focus when it appears, so a
 * keyboard or screen reader user lands on it (and on the warning) rather than below it.
 */
export function OnceKey({ created, title, children, onDone }) {
  const ref = useRef(null);
  const [copied, setCopied] = useState(null);
  useEffect(() => {
    ref.current?.focus();
    setCopied(null);
  }, [created.id]);
  const copy = () =>
    navigator.clipboard.writeText(created.key).then(
      () => setCopied("Copied to the clipboard."),
      () => setCopied("The browser refused the clipboard: select the key and copy it."),
    );
  return html`<section class="once" aria-labelledby="once-title" tabindex="-1" ref=${ref}>
    <h2 id="once-title">${title}</h2>
    <p><strong>Copy this key now: you will not see it again.</strong> Modelgate keeps only its hash.</p>
    <p class="key-line"><code data-testid="key-value">${created.key}</code>
      <button type="button" onClick=${copy}>Copy key</button> <span role="status">${copied}</span></p>
    ${children}
    <button type="button" onClick=${onDone}>I have stored it</button>
  </section>`;
}

export function formatDate(iso) {
  return iso ? iso.replace("T", " ").slice(0, 19) + " UTC" : "never";
}
