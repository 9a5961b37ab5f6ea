import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

/**
 * The Studio's client (studio/ at the repository root), built from source with Bun's bundler the
 * first time it is asked for, then served from memory: no CDN, no separate dev server. The build
 * is code-split (the record editor, the rich-text editor and GraphiQL load when opened) and each
 * asset is kept with its gzip form. The whole build is a few MB at most and built once per
 * process, so the cache is bounded by the size of the app itself.
 */
export const STUDIO_ROOT = fileURLToPath(new URL('../../studio/', import.meta.url));
export const ASSET_PREFIX = '/studio/assets/';

export interface StudioAsset {
  body: Uint8Array;
  gzip: Uint8Array;
  type: string;
}

export interface StudioBuild {
  assets: Map<string, StudioAsset>;
  /** The entry script and stylesheet names (under ASSET_PREFIX). */
  entry: string;
  styles: string[];
  /** Every script the first page load fetches: the entry and what it imports statically. */
  firstLoad: string[];
  /** Their gzip bytes together (docs/studio.md keeps the figure; a test holds it under 300 KB). */
  firstLoadGzipBytes: number;
  builtInMs: number;
}

const TYPES: Record<string, string> = {
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  map: 'application/json',
  svg: 'image/svg+xml',
  woff2: 'font/woff2',
  png: 'image/png',
};

function typeOf(name: string): string {
  return TYPES[name.slice(name.lastIndexOf('.') + 1)] ?? 'application/octet-stream';
}

const STATIC_IMPORT = /(?:^|[;}\s])(?:import|export)\s*(?:[\w$*{}\s,]*?from\s*)?["'](\/studio\/assets\/[^"']+)["']/g;

function staticImports(code: string): string[] {
  return [...code.matchAll(STATIC_IMPORT)].map((m) => m[1]!.slice(ASSET_PREFIX.length));
}

export async function buildStudio(root = STUDIO_ROOT): Promise<StudioBuild> {
  const started = performance.now();
  const result = await Bun.build({
    entrypoints: [`${root}main.tsx`],
    target: 'browser',
    format: 'esm',
    splitting: true,
    minify: true,
    sourcemap: 'none',
    publicPath: ASSET_PREFIX,
    naming: { entry: '[name]-[hash].[ext]', chunk: 'chunk-[hash].[ext]', asset: '[name]-[hash].[ext]' },
    define: { 'process.env.NODE_ENV': '"production"' },
    throw: false,
  });
  if (!result.success) {
    const why = result.logs.filter((l) => l.level === 'error').map((l) => String(l.message ?? l)).slice(0, 5).join('; ');
    throw new Error(`the Studio did not build: ${why}`);
  }
  const assets = new Map<string, StudioAsset>();
  let entry = '';
  const styles: string[] = [];
  for (const out of result.outputs) {
    const name = out.path.replace(/^.*[\\/]/, '');
    const body = new Uint8Array(await out.arrayBuffer());
    assets.set(name, { body, gzip: gzipSync(body, { level: 9 }), type: typeOf(name) });
    if (out.kind === 'entry-point' && name.endsWith('.js')) entry = name;
    if (name.endsWith('.css')) styles.push(name);
  }
  if (!entry) throw new Error('the Studio did not build: no entry script');
  // The first load: the entry and its static imports, transitively (dynamic import() excluded).
  const firstLoad: string[] = [];
  const todo = [entry];
  while (todo.length) {
    const name = todo.pop()!;
    if (firstLoad.includes(name) || !assets.has(name)) continue;
    firstLoad.push(name);
    todo.push(...staticImports(new TextDecoder().decode(assets.get(name)!.body)));
  }
  const firstLoadGzipBytes = firstLoad.reduce((n, f) => n + assets.get(f)!.gzip.byteLength, 0);
  return { assets, entry, styles, firstLoad, firstLoadGzipBytes, builtInMs: Math.round(performance.now() - started) };
}

/** Builds once per process (concurrent callers share the build); a failed build is retried. */
export class StudioBundle {
  #build: Promise<StudioBuild> | undefined;

  constructor(private readonly root = STUDIO_ROOT) {}

  get(): Promise<StudioBuild> {
    this.#build ??= buildStudio(this.root).catch((err) => {
      this.#build = undefined;
      throw err;
    });
    return this.#build;
  }
}

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** The one page of the app; the client routes under /studio/. */
export function studioHtml(b: StudioBuild, config: { realtimeUrl: string; production: boolean }): string {
  const preload = b.firstLoad.filter((f) => f !== b.entry).map((f) => `<link rel="modulepreload" href="${ASSET_PREFIX}${f}">`).join('');
  const css = b.styles.map((f) => `<link rel="stylesheet" href="${ASSET_PREFIX}${f}">`).join('');
  const cfg = escapeHtml(JSON.stringify(config));
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">`
    + `<title>svc Studio</title><link rel="icon" href="data:,"><meta name="svc-studio" content="${cfg}">${css}${preload}</head>`
    + `<body><div id="app"></div><script type="module" src="${ASSET_PREFIX}${b.entry}"></script></body></html>`;
}
