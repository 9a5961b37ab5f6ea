/** The CLI's HTTP client for the control plane: one clear line for every failure. */
export class CliError extends Error {}

export interface ClientOptions {
  url: string;
  token: string | undefined;
}

export class ControlClient {
  constructor(readonly opts: ClientOptions) {}

  async request<T = Record<string, unknown>>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.opts.token) headers.authorization = `Bearer ${this.opts.token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    let res: Response;
    try {
      res = await fetch(new URL(path, this.opts.url), {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch {
      throw new CliError(`cannot reach svc at ${this.opts.url} (is it running? set --url or SVC_URL)`);
    }
    const text = await res.text();
    let data: Record<string, unknown> = {};
    try {
      data = text ? JSON.parse(text) : {};
    } catch {
      throw new CliError(`${res.status}: the server answered with something that is not JSON`);
    }
    if (!res.ok) {
      const msg = typeof data.message === 'string' ? data.message : res.statusText;
      throw new CliError(`${res.status} ${String(data.error ?? 'ERROR')}: ${msg}`);
    }
    return data as T;
  }
}
