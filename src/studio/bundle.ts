import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

/**
 * The Studio's client (studio/ at the repository root), built from source with Bun's bundler the
 * first time it is asked for, then served from memory: no CDN, no separate dev server. Two
 * builds, each made once per process on first use: the app (code-split: the record editor and
 * the rich-text editor load when a record is opened) and the GraphQL explorer (GraphiQL with
 * React and Monaco, and Monaco's web workers), which only the explorer screen loads. Each asset
 * is kept with its gzip form; the cache holds exactly these two builds, a few MB.
 */
export const STUDIO_ROOT = fileURLToPath(new URL('../../studio/', import.meta.url));
export const ASSET_PREFIX = '/studio/assets/';
export const EXPLORER_PREFIX = '/studio/explorer/';

export interface StudioAsset {
  body: Uint8Array;
  gzip: Uint8Array;
  type: string;
}

interface Built {
  assets: Map<string, StudioAsset>;
  /** Entry scripts by their entry file's base name (`main`, `editor.worker`, …). */
  entries: Map<string, string>;
  styles: string[];
  builtInMs: number;
}

export interface StudioBuild extends Built {
  /** The entry script (under ASSET_PREFIX). */
  entry: string;
  /** Every script the first page load fetches: the entry and what it imports statically. */
  firstLoad: string[];
  /** Their gzip bytes together (docs/studio.md keeps the figure; a test holds it under 300 KB). */
  firstLoadGzipBytes: number;
}

/** What the explorer screen loads (GET /studio/explorer/manifest.json). */
export interface ExplorerBuild extends Built {
  manifest: { entry: string; styles: string[]; workers: Record<string, string> };
  /** The entry of the standalone `/graphiql` page. */
  page: string;
}

const TYPES: Record<string, string> = {
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  svg: 'image/svg+xml',
  ttf: 'font/ttf',
  woff: 'font/woff',
  woff2: 'font/woff2',
  png: 'image/png',
};

function typeOf(name: string): string {
  return TYPES[name.slice(name.lastIndexOf('.') + 1)] ?? 'application/octet-stream';
}

async function build(entrypoints: string[], publicPath: string): Promise<Built> {
  const started = performance.now();
  const result = await Bun.build({
    entrypoints,
    target: 'browser',
    format: 'esm',
    splitting: true,
    minify: true,
    sourcemap: 'none',
    publicPath,
    naming: { entry: '[name]-[hash].[ext]', chunk: 'chunk-[hash].[ext]', asset: '[name]-[hash].[ext]' },
    define: { 'process.env.NODE_ENV': '"production"' },
    throw: false,
  });
  if (!result.success) {
    const why = result.logs
      .filter((l) => l.level === 'error')
      .map((l) => String(l.message ?? l))
      .slice(0, 5)
      .join('; ');
    throw new Error(`the Studio did not build: ${why}`);
  }
  const assets = new Map<string, StudioAsset>();
  const entries = new Map<string, string>();
  const styles: string[] = [];
  for (const out of result.outputs) {
    const name = out.path.replace(/^.*[\\/]/, '');
    const body = new Uint8Array(await out.arrayBuffer());
    assets.set(name, { body, gzip: gzipSync(body, { level: 9 }), type: typeOf(name) });
    if (out.kind === 'entry-point' && name.endsWith('.js')) entries.set(name.replace(/-[a-z0-9]+\.js$/, ''), name);
    if (name.endsWith('.css')) styles.push(name);
  }
  return { assets, entries, styles, builtInMs: Math.round(performance.now() - started) };
}

const STATIC_IMPORT = /(?:^|[;}\s])(?:import|export)\s*(?:[\w$*{}\s,]*?from\s*)?["'](\/studio\/assets\/[^"']+)["']/g;

function staticImports(code: string): string[] {
  return [...code.matchAll(STATIC_IMPORT)].map((m) => m[1]!.slice(ASSET_PREFIX.length));
}

export async function buildStudio(root = STUDIO_ROOT): Promise<StudioBuild> {
  const b = await build([`${root}main.tsx`], ASSET_PREFIX);
  const entry = b.entries.get('main');
  if (!entry) throw new Error('the Studio did not build: no entry script');
  // The first load: the entry and its static imports, transitively (dynamic import() excluded).
  const firstLoad: string[] = [];
  const todo = [entry];
  while (todo.length) {
    const name = todo.pop()!;
    if (firstLoad.includes(name) || !b.assets.has(name)) continue;
    firstLoad.push(name);
    todo.push(...staticImports(new TextDecoder().decode(b.assets.get(name)!.body)));
  }
  const firstLoadGzipBytes = firstLoad.reduce((n, f) => n + b.assets.get(f)!.gzip.byteLength, 0);
  return { ...b, entry, firstLoad, firstLoadGzipBytes };
}

/** Monaco's workers, built as entries of their own (GraphiQL's editors run them). */
const WORKERS: Record<string, string> = {
  editor: 'monaco-editor/esm/vs/editor/editor.worker.js',
  json: 'monaco-editor/esm/vs/language/json/json.worker.js',
  graphql: 'monaco-graphql/esm/graphql.worker.js',
};

export async function buildExplorer(root = STUDIO_ROOT): Promise<ExplorerBuild> {
  const workerFiles = Object.entries(WORKERS).map(([label, spec]) => [label, Bun.resolveSync(spec, root)] as const);
  const b = await build(
    [`${root}graphiql-mount.ts`, `${root}graphiql-page.ts`, ...workerFiles.map(([, f]) => f)],
    EXPLORER_PREFIX,
  );
  const entry = b.entries.get('graphiql-mount');
  const page = b.entries.get('graphiql-page');
  if (!entry || !page) throw new Error('the explorer did not build: no entry script');
  const workers: Record<string, string> = {};
  for (const [label, file] of workerFiles) {
    const name = b.entries.get(file.replace(/^.*[\\/]/, '').replace(/\.js$/, ''));
    if (name) workers[label] = `${EXPLORER_PREFIX}${name}`;
  }
  return {
    ...b,
    page: `${EXPLORER_PREFIX}${page}`,
    manifest: { entry: `${EXPLORER_PREFIX}${entry}`, styles: b.styles.map((s) => `${EXPLORER_PREFIX}${s}`), workers },
  };
}

/** The `/graphiql` page: GraphiQL alone, for API keys. */
export function graphiqlHtml(e: ExplorerBuild): string {
  const css = e.manifest.styles.map((f) => `<link rel="stylesheet" href="${f}">`).join('');
  const cfg = escapeHtml(JSON.stringify({ workers: e.manifest.workers }));
  return (
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">` +
    `<title>svc GraphiQL</title><link rel="icon" href="data:,"><meta name="svc-explorer" content="${cfg}">${css}` +
    `<style>html,body,#graphiql{height:100%;margin:0}</style></head>` +
    `<body><div id="graphiql"></div><script type="module" src="${e.page}"></script></body></html>`
  );
}

/** Builds once per process on first use (concurrent callers share it); a failed build is retried. */
export class Lazy<T> {
  #value: Promise<T> | undefined;

  constructor(private readonly make: () => Promise<T>) {}

  get(): Promise<T> {
    this.#value ??= this.make().catch((err) => {
      this.#value = undefined;
      throw err;
    });
    return this.#value;
  }
}

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** The one page of the app; the client routes under /studio/. */
export function studioHtml(b: StudioBuild, config: { realtimeUrl: string; production: boolean }): string {
  const preload = b.firstLoad
    .filter((f) => f !== b.entry)
    .map((f) => `<link rel="modulepreload" href="${ASSET_PREFIX}${f}">`)
    .join('');
  const css = b.styles.map((f) => `<link rel="stylesheet" href="${ASSET_PREFIX}${f}">`).join('');
  const cfg = escapeHtml(JSON.stringify(config));
  return (
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">` +
    `<title>svc Studio</title><link rel="icon" href="data:,"><meta name="svc-studio" content="${cfg}">${css}${preload}</head>` +
    `<body><div id="app"></div><script type="module" src="${ASSET_PREFIX}${b.entry}"></script></body></html>`
  );
}
