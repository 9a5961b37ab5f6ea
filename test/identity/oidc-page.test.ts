import { describe, expect, test } from 'bun:test';
import { renderLoginPage, textOn } from '../../src/identity/oidc/page.ts';

const ratio = (a: number, b: number) => (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
function lum(hex: string): number {
  const h =
    hex.length === 4
      ? hex
          .slice(1)
          .split('')
          .map((c) => c + c)
          .join('')
      : hex.slice(1);
  const ch = [0, 2, 4]
    .map((i) => parseInt(h.slice(i, i + 2), 16) / 255)
    .map((c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4));
  return 0.2126 * ch[0]! + 0.7152 * ch[1]! + 0.0722 * ch[2]!;
}

describe('the login page', () => {
  test('button text on any brand colour is the more readable of white and near-black', () => {
    for (const c of ['#ff0', '#ffd700', '#0b6e4f', '#1d4ed8', '#777777', '#00aa55', '#000', '#fff', '#e11d48']) {
      const ink = textOn(c);
      const other = ink === '#fff' ? '#111111' : '#ffffff';
      expect(ratio(lum(c), lum(ink === '#fff' ? '#ffffff' : '#111111'))).toBeGreaterThanOrEqual(
        ratio(lum(c), lum(other)),
      );
    }
    expect(textOn('#ff0')).toBe('#111');
    expect(textOn('#1d4ed8')).toBe('#fff');
  });

  test('a brand colour or logo that is not a plain colour or https URL never reaches the page', () => {
    const html = renderLoginPage({
      action: '/auth/authorize',
      party: {
        projectId: 'prj_1',
        clientId: 'web',
        name: 'Web <b>',
        redirectUris: [],
        allowedScopes: null,
        allowedOrigins: [],
        postLoginUrl: null,
        loginMethods: { password: true, otp: false, disabledProviders: [] },
      },
      branding: {
        displayName: 'Acme"><script>x</script>',
        logoUrl: 'javascript:alert(1)',
        primaryColor: 'red;}body{display:none',
      },
      request: null,
      csrf: 't',
      methods: { password: true, otp: false, signup: false },
      providers: [{ key: 'g', name: 'G<i>', isDefault: false }],
    });
    expect(html).not.toContain('<script>');
    expect(html).not.toContain('javascript:');
    expect(html).not.toContain('display:none');
    expect(html).toContain('Web &#60;b&#62;');
    expect(html).toContain('Continue with G&#60;i&#62;');
  });
});
