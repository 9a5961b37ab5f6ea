import { useState } from 'preact/hooks';
import { ApiError, request, setCsrf } from './api.ts';

type Mode = 'password' | 'code';

/** Email + password, or a one-time code by mail; `welcome` sets the first password from a link. */
export function SignIn({ welcome, onSignedIn }: { welcome: boolean; onSignedIn: () => void }) {
  const [mode, setMode] = useState<Mode>('password');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [code, setCode] = useState('');
  const [codeSent, setCodeSent] = useState(false);
  const [tenants, setTenants] = useState<{ id: string; name: string }[] | null>(null);
  const [tenantId, setTenantId] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const token = new URLSearchParams(location.hash.slice(1)).get('token');

  const run = async (fn: () => Promise<void>) => {
    setBusy(true);
    setError('');
    try {
      await fn();
    } catch (e) {
      const err = e as ApiError;
      const choices = (err.details as { tenants?: { id: string; name: string }[] }).tenants;
      if (choices) setTenants(choices);
      setError(err.message);
    } finally {
      setBusy(false);
    }
  };
  const done = (r: { csrf: string }) => {
    setCsrf(r.csrf);
    history.replaceState(null, '', location.pathname);
    onSignedIn();
  };

  if (welcome) {
    return (
      <main class="signin">
        <h1>Welcome to the svc Studio</h1>
        {!token ? (
          <p role="alert">This link is incomplete: open the whole link you were given.</p>
        ) : (
          <form
            onSubmit={(e) => {
              e.preventDefault();
              void run(async () => done(await request('POST', '/studio/api/welcome', { token, password })));
            }}
          >
            <p>Choose a password (at least 10 characters) to finish setting up your account.</p>
            <label>
              New password
              <input
                type="password"
                autocomplete="new-password"
                required
                minLength={10}
                value={password}
                onInput={(e) => setPassword(e.currentTarget.value)}
              />
            </label>
            {error && (
              <p role="alert" class="error">
                {error}
              </p>
            )}
            <button type="submit" disabled={busy}>
              Set password and sign in
            </button>
          </form>
        )}
      </main>
    );
  }
  return (
    <main class="signin">
      <h1>Sign in to the svc Studio</h1>
      <div role="tablist" class="tabs" aria-label="Sign-in method">
        <button
          type="button"
          role="tab"
          aria-selected={mode === 'password'}
          onClick={() => {
            setMode('password');
            setError('');
          }}
        >
          Password
        </button>
        <button
          type="button"
          role="tab"
          aria-selected={mode === 'code'}
          onClick={() => {
            setMode('code');
            setError('');
          }}
        >
          One-time code
        </button>
      </div>
      {mode === 'password' ? (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void run(async () =>
              done(await request('POST', '/studio/api/login', { email, password, tenantId: tenantId || undefined })),
            );
          }}
        >
          <label>
            Email
            <input
              type="email"
              autocomplete="username"
              required
              value={email}
              onInput={(e) => setEmail(e.currentTarget.value)}
            />
          </label>
          <label>
            Password
            <input
              type="password"
              autocomplete="current-password"
              required
              value={password}
              onInput={(e) => setPassword(e.currentTarget.value)}
            />
          </label>
          {tenants && (
            <label>
              Tenant
              <select
                aria-label="Tenant"
                required
                value={tenantId}
                onChange={(e) => setTenantId(e.currentTarget.value)}
              >
                <option value="">Choose…</option>
                {tenants.map((t) => (
                  <option key={t.id} value={t.id}>
                    {t.name}
                  </option>
                ))}
              </select>
            </label>
          )}
          {error && (
            <p role="alert" class="error">
              {error}
            </p>
          )}
          <button type="submit" disabled={busy}>
            Sign in
          </button>
        </form>
      ) : (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void run(async () => {
              if (!codeSent) {
                await request('POST', '/studio/api/code', { email });
                setCodeSent(true);
              } else done(await request('POST', '/studio/api/login-code', { email, code }));
            });
          }}
        >
          <label>
            Email
            <input
              type="email"
              autocomplete="username"
              required
              value={email}
              readOnly={codeSent}
              onInput={(e) => setEmail(e.currentTarget.value)}
            />
          </label>
          {codeSent && (
            <>
              <p class="muted">If this address belongs to a member, a 6-digit code is on its way.</p>
              <label>
                Code
                <input
                  inputMode="numeric"
                  autocomplete="one-time-code"
                  pattern="[0-9]{6}"
                  required
                  value={code}
                  onInput={(e) => setCode(e.currentTarget.value)}
                />
              </label>
            </>
          )}
          {error && (
            <p role="alert" class="error">
              {error}
            </p>
          )}
          <button type="submit" disabled={busy}>
            {codeSent ? 'Sign in' : 'Send me a code'}
          </button>
        </form>
      )}
    </main>
  );
}
