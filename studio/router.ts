import { useEffect, useState } from 'preact/hooks';

/** Paths under /studio/, with the History API (the server answers every /studio/* with the app). */
export const BASE = '/studio';

export function currentPath(): string {
  const p = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : '/';
  return p === '' ? '/' : p;
}

const listeners = new Set<() => void>();
window.addEventListener('popstate', () => {
  for (const fn of listeners) fn();
});

export function navigate(path: string, replace = false): void {
  const url = BASE + path;
  if (replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  for (const fn of listeners) fn();
  window.scrollTo(0, 0);
}

export function usePath(): string {
  const [path, setPath] = useState(currentPath());
  useEffect(() => {
    const fn = () => setPath(currentPath());
    listeners.add(fn);
    return () => void listeners.delete(fn);
  }, []);
  return path;
}

/** The path of a model's record list (`/p/:pid/m/:model`); its records are under `/r/:id`. */
export const modelPath = (projectId: string, modelKey: string) => `/p/${encodeURIComponent(projectId)}/m/${modelKey}`;

/** `/p/:pid/m/:model` against `/p/prj_1/m/post` → { pid, model }, or null. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const a = pattern.split('/');
  const b = path.split('/');
  if (a.length !== b.length) return null;
  const out: Record<string, string> = {};
  for (let i = 0; i < a.length; i++) {
    if (a[i]!.startsWith(':')) out[a[i]!.slice(1)] = decodeURIComponent(b[i]!);
    else if (a[i] !== b[i]) return null;
  }
  return out;
}

/** A link that navigates in the app (modifier clicks still open a tab). */
export function onLink(e: MouseEvent): void {
  const a = e.currentTarget as HTMLAnchorElement;
  if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  e.preventDefault();
  navigate(a.getAttribute('href')!.slice(BASE.length) || '/');
}
