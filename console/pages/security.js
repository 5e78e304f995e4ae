import { useState } from "preact/hooks";
import { api } from "../api.js";
import { html, Field, Notice } from "../ui.js";

/**
 * The signed-in user's own security: TOTP on (a secret for the authenticator app, confirmed by a code; recovery codes
 * shown this once) or off (with the password), and signing out of every browser.
 */
export function SecurityPage({ me, onChanged, onSignedOut }) {
  const [setup, setSetup] = useState(null);
  const [code, setCode] = useState("");
  const [password, setPassword] = useState("");
  const [codes, setCodes] = useState(null);
  const [error, setError] = useState(null);
  const [note, setNote] = useState(null);
  const attempt = (fn) => async (e) => {
    e?.preventDefault();
    setError(null);
    setNote(null);
    try {
      await fn();
    } catch (err) {
      setError(err);
    }
  };
  const start = attempt(async () => setSetup(await api.totpSetup()));
  const enable = attempt(async () => {
    const answer = await api.totpEnable(code);
    setCodes(answer.recoveryCodes);
    setSetup(null);
    setCode("");
    onChanged({ ...me, totpEnabled: true });
    setTimeout(() => document.getElementById("recovery-title")?.focus());
  });
  const disable = attempt(async () => {
    await api.totpDisable(password);
    setPassword("");
    setNote("Two-factor sign-in is off.");
    onChanged({ ...me, totpEnabled: false });
  });
  const everywhere = attempt(async () => {
    await api.logoutEverywhere();
    onSignedOut();
  });
  return html`<h1>Security</h1>
    <p class="meta">Signed in as ${me.email} (${me.role}${me.accountName ? ` of ${me.accountName}` : ""}).</p>
    <${Notice} error=${error} note=${note} />
    <section class="panel" aria-labelledby="totp-title">
      <h2 id="totp-title">Two-factor sign-in (TOTP)</h2>
      ${codes && html`<div class="once" role="region" aria-labelledby="recovery-title">
        <h3 id="recovery-title" tabindex="-1">Your recovery codes</h3>
        <p><strong>Store these now: you will not see them again.</strong> Each one signs you in once if you lose the authenticator.</p>
        <ul class="codes" data-testid="recovery-codes">${codes.map((c) => html`<li><code>${c}</code></li>`)}</ul>
        <button type="button" onClick=${() => setCodes(null)}>I have stored them</button>
      </div>`}
      ${me.totpEnabled && !codes && html`<p>On. Sign-in asks for the code from your authenticator app.</p>
        <form onSubmit=${disable}>
          <${Field} id="totp-off-password" label="Password" type="password" value=${password} onInput=${setPassword} required autocomplete="current-password" hint="Needed to turn two-factor sign-in off." />
          <button type="submit" class="danger">Turn two-factor sign-in off</button>
        </form>`}
      ${!me.totpEnabled && !setup && html`<p>Off. With it on, a stolen password is not enough to sign in.</p>
        <button type="button" class="primary" onClick=${start}>Turn on two-factor sign-in</button>`}
      ${setup && html`<form onSubmit=${enable}>
        <p>Add this key to your authenticator app (Google Authenticator, 1Password, Aegis…), then enter the code it shows.</p>
        <p class="key-line">Key: <code data-testid="totp-secret">${setup.secret}</code></p>
        <p class="hint">Or open this link on the device: <a href=${setup.uri}>${setup.uri.split("?")[0]}</a></p>
        <${Field} id="totp-code" label="Code from the app" value=${code} onInput=${setCode} required autocomplete="one-time-code" />
        <button type="submit" class="primary">Turn on</button>
      </form>`}
    </section>
    <section class="panel" aria-labelledby="sessions-title">
      <h2 id="sessions-title">Sessions</h2>
      <p>Signs you out in every browser, this one included.</p>
      <button type="button" onClick=${everywhere}>Sign out everywhere</button>
    </section>`;
}
