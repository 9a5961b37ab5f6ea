/**
 * The Studio talks to the public APIs only (docs/studio.md): GraphQL, /collab/info, uploads and
 * the control plane, authenticated by the member's session cookie (HttpOnly, sent by the
 * browser) plus the CSRF token the session endpoint hands out, and X-Project-Id.
 */
export interface ProjectRef {
  id: string;
  name: string;
  role: Role;
}
export type Role = 'owner' | 'admin' | 'editor' | 'viewer';
export interface Session {
  email: string;
  tenant: { id: string; name: string };
  csrf: string;
  projects: ProjectRef[];
}

export class ApiError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly status: number,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

let csrf = '';
export function setCsrf(token: string): void {
  csrf = token;
}
export function csrfToken(): string {
  return csrf;
}

/** Listeners told when the session ended (401 from any call): the app shows the sign-in. */
const signedOut = new Set<() => void>();
export function onSignedOut(fn: () => void): () => void {
  signedOut.add(fn);
  return () => signedOut.delete(fn);
}

function headers(projectId?: string, json = true): Record<string, string> {
  const h: Record<string, string> = { 'x-csrf-token': csrf, accept: 'application/json' };
  if (json) h['content-type'] = 'application/json';
  if (projectId) h['x-project-id'] = projectId;
  return h;
}

async function answer<T>(res: Response): Promise<T> {
  const text = await res.text();
  let body: any = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    throw new ApiError(`The server answered ${res.status}`, 'INTERNAL_SERVER_ERROR', res.status);
  }
  if (!res.ok) {
    const code = body?.error ?? body?.errors?.[0]?.extensions?.code ?? 'ERROR';
    const message = body?.message ?? body?.errors?.[0]?.message ?? `The server answered ${res.status}`;
    if (res.status === 401 && csrf) for (const fn of signedOut) fn();
    throw new ApiError(message, code, res.status, body?.details ?? body ?? {});
  }
  return body as T;
}

export async function request<T = any>(method: string, path: string, body?: unknown, projectId?: string): Promise<T> {
  const res = await fetch(path, {
    method,
    headers: headers(projectId, body !== undefined),
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'same-origin',
  });
  return answer<T>(res);
}

/** One GraphQL operation on the project's generated schema; the first error throws. */
export async function gql<T = any>(projectId: string, query: string, variables?: Record<string, unknown>): Promise<T> {
  const res = await fetch('/graphql', {
    method: 'POST',
    headers: headers(projectId),
    body: JSON.stringify({ query, variables }),
    credentials: 'same-origin',
  });
  const body = await answer<{
    data?: T;
    errors?: { message: string; extensions?: { code?: string; field?: string } }[];
  }>(res);
  if (body.errors?.length) {
    const e = body.errors[0]!;
    throw new ApiError(e.message, e.extensions?.code ?? 'FORBIDDEN', 200, e.extensions ?? {});
  }
  return body.data as T;
}

export interface UploadedFile {
  id: string;
  url: string;
  filename: string;
  contentType: string;
  size: number;
  width: number | null;
  height: number | null;
  alt: string | null;
}

export async function upload(projectId: string, file: File, alt?: string): Promise<UploadedFile> {
  const form = new FormData();
  form.append('file', file);
  if (alt) form.append('alt', alt);
  const res = await fetch('/api/files/upload', {
    method: 'POST',
    headers: headers(projectId, false),
    body: form,
    credentials: 'same-origin',
  });
  return answer<UploadedFile>(res);
}

export async function loadSession(): Promise<Session | null> {
  const res = await fetch('/studio/api/session', {
    headers: { accept: 'application/json' },
    credentials: 'same-origin',
  });
  const s = await answer<Session & { signedIn: boolean }>(res);
  if (!s.signedIn) return null;
  setCsrf(s.csrf);
  return s;
}

export const canEdit = (role: Role): boolean => role !== 'viewer';
export const canAdmin = (role: Role): boolean => role === 'owner' || role === 'admin';
