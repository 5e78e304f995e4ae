import { useEffect, useState } from "preact/hooks";
import { api } from "../api.js";
import { html, Field, Notice } from "../ui.js";

/**
 * Email and password, then the authenticator's code when the user turned TOTP on (the server asks for it only once
 * the password was right). Operators sign in through single sign-on when the server has it.
 */
export function SignInPage({ onSignedIn, note, error: given }) {
  const [form, setForm] = useState({ email: "", password: "", code: "" });
  const [needCode, setNeedCode] = useState(false);
  const [error, setError] = useState(given ? { message: given } : null);
  const [sso, setSso] = useState(false);
  useEffect(() => {
    api.signInOptions().then((o) => setSso(o.sso), () => {});
  }, []);
  const set = (field) => (value) => setForm({ ...form, [field]: value });
  const submit = async (e) => {
    e.preventDefault();
    setError(null);
    try {
      const session = await api.login(form.email, form.password, needCode ? form.code : undefined);
      onSignedIn(session);
    } catch (err) {
      if (err.param === "code" && !needCode) {
        setNeedCode(true);
        setTimeout(() => document.getElementById("signin-code")?.focus());
      } else setError(err);
    }
  };
  return html`<main id="main" class="login">
    <h1>Sign in to Modelgate</h1>
    <form onSubmit=${submit}>
      <${Field} id="signin-email" label="Email" type="email" value=${form.email} onInput=${set("email")} required autocomplete="username" />
      <${Field} id="signin-password" label="Password" type="password" value=${form.password} onInput=${set("password")} required autocomplete="current-password" />
      ${needCode && html`<${Field} id="signin-code" label="Authenticator code" value=${form.code} onInput=${set("code")} required autocomplete="one-time-code"
        hint="The 6-digit code from your authenticator app, or one of your recovery codes." />`}
      <${Notice} error=${error} note=${note} />
      <button type="submit" class="primary">${needCode ? "Verify and sign in" : "Sign in"}</button>
    </form>
    ${sso && html`<p class="sso"><a class="button" href="/console/api/oidc/start">Operators: sign in with single sign-on</a></p>`}
    <p class="hint">No account yet? Ask an owner of your organisation's account (or your operator) for an invite link.</p>
  </main>`;
}

/**
 * An invite or password-reset link: who it is for, then a new password (twice), and for a reset of a user with TOTP
 * on, the authenticator's code (or a recovery code); accepting signs in.
 */
export function AcceptInvitePage({ token, onSignedIn }) {
  const [invite, setInvite] = useState(null);
  const [error, setError] = useState(null);
  const [form, setForm] = useState({ password: "", again: "", code: "" });
  useEffect(() => {
    api.inviteLookup(token).then(setInvite, setError);
  }, [token]);
  const set = (field) => (value) => setForm({ ...form, [field]: value });
  const submit = async (e) => {
    e.preventDefault();
    setError(null);
    if (form.password !== form.again) return setError({ message: "The two passwords differ.", param: "password" });
    try {
      const session = await api.acceptInvite(token, form.password, invite.secondFactor ? form.code : undefined);
      onSignedIn(session);
      // The link leaves the history: the next page (where TOTP is turned on) replaces it.
      location.replace("#/security");
    } catch (err) {
      setError(err);
    }
  };
  if (!invite) return html`<main id="main" class="login"><h1>Invitation</h1><${Notice} error=${error} note=${error ? null : "Checking the link…"} /></main>`;
  const reset = invite.purpose === "reset";
  return html`<main id="main" class="login">
    <h1>${reset ? "Choose a new password" : "Join Modelgate"}</h1>
    <p>${reset ? html`For <strong>${invite.email}</strong>.` : html`<strong>${invite.email}</strong> is invited ${invite.accountName ? html`to the account <strong>${invite.accountName}</strong>` : "as an operator"} with the role <strong>${invite.role}</strong>.`}</p>
    <form onSubmit=${submit}>
      <${Field} id="new-password" label="New password" type="password" value=${form.password} onInput=${set("password")} required autocomplete="new-password"
        hint="At least 12 characters; a common password is refused. A sentence of a few words works well." />
      <${Field} id="new-password-again" label="The same password again" type="password" value=${form.again} onInput=${set("again")} required autocomplete="new-password" />
      ${invite.secondFactor && html`<${Field} id="reset-code" label="Authenticator code" value=${form.code} onInput=${set("code")} required autocomplete="one-time-code"
        hint="Two-factor sign-in is on: the 6-digit code from your authenticator app, or one of your recovery codes." />`}
      <${Notice} error=${error} />
      <button type="submit" class="primary">${reset ? "Set the password and sign in" : "Set the password and join"}</button>
    </form>
    <p class="hint">This link works once and expires 72 hours after it was made.</p>
  </main>`;
}
