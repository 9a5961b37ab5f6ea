import type { AuthorizeRequest, Party } from './protocol.ts';

/**
 * The hosted login page: plain HTML forms (works without JavaScript), one section per login
 * method the project and the party both allow, labels on every field, the party's name and the
 * project's branding. Pure rendering; the adapter sets the headers (CSP frame-ancestors 'none').
 */
export interface Branding {
  displayName: string | null;
  logoUrl: string | null;
  primaryColor: string | null;
}

export interface PageModel {
  action: string;
  party: Party;
  branding: Branding;
  /** Null on a bare visit to a custom domain (no relying-party request). */
  request: AuthorizeRequest | null;
  csrf: string;
  methods: { password: boolean; otp: boolean; signup: boolean };
  /** Upstream providers ("Continue with …"), in priority order; the default one first. */
  providers?: { key: string; name: string; isDefault: boolean }[] | undefined;
  error?: string | undefined;
  notice?: string | undefined;
  email?: string | undefined;
  /** After a code was requested: show the code field first. */
  otpSent?: boolean | undefined;
}

export const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** Only a plain #rgb/#rrggbb colour reaches the style sheet. */
const color = (c: string | null) => (c && /^#[0-9a-fA-F]{3}([0-9a-fA-F]{3})?$/.test(c) ? c : '#1d4ed8');
/** WCAG relative luminance of #rgb/#rrggbb. */
function luminance(hex: string): number {
  const h =
    hex.length === 4
      ? hex
          .slice(1)
          .split('')
          .map((c) => c + c)
          .join('')
      : hex.slice(1);
  const [r, g, b] = [0, 2, 4].map((i) => {
    const c = parseInt(h.slice(i, i + 2), 16) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r! + 0.7152 * g! + 0.0722 * b!;
}

/** Button text on the brand colour: white or near-black, whichever contrasts more (WCAG 2 ratio). */
export function textOn(accent: string): string {
  const l = luminance(accent);
  return 1.05 / (l + 0.05) >= (l + 0.05) / (luminance('#111111') + 0.05) ? '#fff' : '#111';
}

const httpsUrl = (u: string | null) => (u && /^https:\/\/[^\s"'<>]+$/.test(u) ? u : null);

function hidden(m: PageModel): string {
  const r = m.request;
  const fields: Record<string, string | null> = r
    ? {
        client_id: r.client_id,
        redirect_uri: r.redirect_uri,
        response_type: 'code',
        scope: r.scopes.join(' ') || null,
        state: r.state,
        nonce: r.nonce,
        code_challenge: r.code_challenge,
        code_challenge_method: 'S256',
        csrf: m.csrf,
      }
    : { csrf: m.csrf };
  return Object.entries(fields)
    .filter(([, v]) => v !== null)
    .map(([k, v]) => `<input type="hidden" name="${k}" value="${esc(v!)}">`)
    .join('');
}

function form(m: PageModel, id: string, title: string, step: string, inner: string, button: string): string {
  return (
    `<section id="${id}" aria-labelledby="${id}-h"><h2 id="${id}-h">${title}</h2>` +
    `<form method="post" action="${esc(m.action)}">${hidden(m)}<input type="hidden" name="step" value="${step}">${inner}<button type="submit">${button}</button></form></section>`
  );
}

const field = (id: string, label: string, type: string, name: string, extra = '') =>
  `<label for="${id}">${label}</label><input id="${id}" name="${name}" type="${type}" ${extra} required>`;

export function renderLoginPage(m: PageModel): string {
  const brand = m.branding.displayName ?? 'Sign in';
  const logo = httpsUrl(m.branding.logoUrl);
  const email = m.email ? `value="${esc(m.email)}"` : '';
  const sections: string[] = [];
  const providers = m.providers ?? [];
  if (providers.length > 0) {
    sections.push(
      `<section id="providers" aria-labelledby="providers-h"><h2 id="providers-h">Continue with an account you have</h2>` +
        providers
          .map(
            (p) =>
              `<form method="post" action="${esc(m.action)}">${hidden(m)}<input type="hidden" name="step" value="upstream">` +
              `<input type="hidden" name="provider" value="${esc(p.key)}"><button type="submit" class="${p.isDefault ? 'provider default' : 'provider'}">Continue with ${esc(p.name)}</button></form>`,
          )
          .join('') +
        `</section>`,
    );
  }
  if (m.methods.otp && m.otpSent) {
    sections.push(
      form(
        m,
        'otp-code',
        'Enter your one-time code',
        'otp',
        `<input type="hidden" name="email" value="${esc(m.email ?? '')}">` +
          field(
            'otp-code-input',
            'Code from the mail',
            'text',
            'code',
            'inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}"',
          ),
        'Sign in',
      ),
    );
  }
  if (m.methods.password) {
    sections.push(
      form(
        m,
        'password',
        'Sign in with your password',
        'password',
        field('pw-email', 'Email', 'email', 'email', `autocomplete="username" ${email}`) +
          field('pw-password', 'Password', 'password', 'password', 'autocomplete="current-password"'),
        'Sign in',
      ),
    );
  }
  if (m.methods.otp && !m.otpSent) {
    sections.push(
      form(
        m,
        'otp',
        'Sign in with a one-time code',
        'otp-request',
        field('otp-email', 'Email', 'email', 'email', `autocomplete="email" ${email}`),
        'Send me a code',
      ),
    );
  }
  if (m.methods.signup && m.methods.password) {
    sections.push(
      form(
        m,
        'signup',
        'Create an account',
        'signup',
        field('su-email', 'Email', 'email', 'email', 'autocomplete="email"') +
          `<label for="su-name">Name (optional)</label><input id="su-name" name="name" type="text" autocomplete="name">` +
          field(
            'su-password',
            'Password (at least 8 characters)',
            'password',
            'password',
            'autocomplete="new-password" minlength="8"',
          ),
        'Create account',
      ),
    );
  }
  const nav =
    sections.length > 1
      ? `<nav aria-label="Ways to sign in"><ul>${[...sections.keys()]
          .map((i) => {
            const id = /<section id="([^"]+)"/.exec(sections[i]!)![1]!;
            const title = /<h2[^>]*>([^<]+)<\/h2>/.exec(sections[i]!)![1]!;
            return `<li><a href="#${id}">${title}</a></li>`;
          })
          .join('')}</ul></nav>`
      : '';
  const accent = color(m.branding.primaryColor);
  const ink = textOn(accent);
  return (
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">` +
    `<title>${esc(brand)}: sign in to ${esc(m.party.name)}</title><style>` +
    `body{font-family:system-ui,sans-serif;color:#111;background:#fff;max-width:26rem;margin:3rem auto;padding:0 1rem;line-height:1.5}` +
    `label{display:block;margin-top:.75rem;font-weight:600}input{display:block;width:100%;box-sizing:border-box;padding:.5rem;font-size:1rem;border:1px solid #555;border-radius:4px}` +
    `input:focus,button:focus,a:focus{outline:3px solid ${accent};outline-offset:2px}button{margin-top:1rem;padding:.6rem 1rem;font-size:1rem;color:${ink};background:${accent};border:0;border-radius:4px}` +
    `button.provider{display:block;width:100%;color:#111;background:#fff;border:2px solid ${accent}}button.provider.default{color:${ink};background:${accent}}` +
    `section{border-top:1px solid #ccc;margin-top:1.5rem}.error{color:#a00;border:1px solid #a00;padding:.5rem}.notice{border:1px solid #555;padding:.5rem}img{max-height:3rem}` +
    `</style></head><body><main><header>${logo ? `<img src="${esc(logo)}" alt="${esc(brand)}">` : ''}<h1>${esc(brand)}</h1>` +
    `<p>Sign in to continue to <strong>${esc(m.party.name)}</strong>.</p></header>` +
    (m.error ? `<p class="error" role="alert">${esc(m.error)}</p>` : '') +
    (m.notice ? `<p class="notice" role="status">${esc(m.notice)}</p>` : '') +
    nav +
    (sections.length ? sections.join('') : '<p>No way to sign in is enabled for this application.</p>') +
    `</main></body></html>`
  );
}

/** A short page with a heading, a sentence and optionally one button form (logout, signed in). */
export function renderInfoPage(
  title: string,
  message: string,
  form?: { action: string; fields: Record<string, string>; button: string },
): string {
  const f = form
    ? `<form method="post" action="${esc(form.action)}">${Object.entries(form.fields)
        .map(([k, v]) => `<input type="hidden" name="${esc(k)}" value="${esc(v)}">`)
        .join('')}` +
      `<button type="submit" style="padding:.6rem 1rem;font-size:1rem;color:#fff;background:#1d4ed8;border:0;border-radius:4px">${esc(form.button)}</button></form>`
    : '';
  return (
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>${esc(title)}</title></head>` +
    `<body style="font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#111"><main><h1>${esc(title)}</h1><p role="status">${esc(message)}</p>${f}</main></body></html>`
  );
}

export function renderErrorPage(message: string): string {
  return (
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>Sign-in error</title></head>` +
    `<body style="font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem"><main><h1>This sign-in link does not work</h1><p role="alert">${esc(message)}</p>` +
    `<p>Go back to the application and try again. If this keeps happening, tell the application's operator.</p></main></body></html>`
  );
}
