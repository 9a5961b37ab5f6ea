import { describe, expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/**
 * The import graph of src/ (docs/architecture.md): a file may import its own layer or a lower
 * one, never a higher one, and no chain of imports (type-only ones included) comes back to
 * where it started — between files, nor between folders (a capability that imports another
 * must not be imported back by it). The Studio (studio/) holds to the same two cycle rules.
 */
const SRC = resolve(import.meta.dir, '../../src');
const STUDIO = resolve(import.meta.dir, '../../studio');
const LAYERS: [number, RegExp][] = [
  [4, /^(main|server)\.ts$/], // entry points: start listeners
  [3, /^(http|cli)\//], // adapters: HTTP listeners, the CLI (talks HTTP)
  [2, /^service(-metrics)?\.ts$/], // the composition root (and the series of what it owns)
  [
    1,
    /^(auth|projects|content|config|identity|secrets|operations|realtime|collab|files|control|graphql|fleet|studio|billing|search|apps|releases|documents|editorial)\//,
  ], // capabilities
  [0, /^(actors|bus|crypto|store|metrics)\/|^(errors|ids|env|root-token|secrets-key|gateway-module)\.ts$/], // runtime and foundations
];
const NAMES = ['foundation', 'capability', 'service', 'adapter', 'entry'];

const files = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? e.name === 'node_modules'
        ? []
        : files(join(dir, e.name))
      : /\.tsx?$/.test(e.name)
        ? [join(dir, e.name)]
        : [],
  );
const layerOf = (rel: string): number => LAYERS.find(([, re]) => re.test(rel))?.[0] ?? -1;
/** Relative imports of every .ts/.tsx file under `root`, as paths relative to `root`. */
function importGraph(root: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of files(root)) {
    const text = readFileSync(file, 'utf8');
    const specs = [
      ...text.matchAll(
        /(?:^|\n)\s*(?:import|export)\b[^'"`;]*?from\s+['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)/g,
      ),
    ].map((m) => m[1] ?? m[2]!);
    graph.set(
      relative(root, file),
      specs.map((s) => relative(root, resolve(dirname(file), s))).filter((t) => /\.tsx?$/.test(t)),
    );
  }
  return graph;
}
const graph = importGraph(SRC);
const studio = importGraph(STUDIO);

/** Every cycle found by a depth-first walk of `g` (empty when `g` is acyclic). */
function cyclesOf(g: ReadonlyMap<string, readonly string[]>): string[] {
  const state = new Map<string, 'open' | 'done'>();
  const cycles: string[] = [];
  const visit = (f: string, path: string[]) => {
    if (state.get(f) === 'done') return;
    if (state.get(f) === 'open') return void cycles.push([...path.slice(path.indexOf(f)), f].join(' → '));
    state.set(f, 'open');
    for (const t of g.get(f) ?? []) visit(t, [...path, f]);
    state.set(f, 'done');
  };
  for (const f of g.keys()) visit(f, []);
  return cycles;
}

/**
 * The same graph between folders (`content/x.ts` → `content`; files at the top are left out,
 * as they are one layer each): two capabilities of one layer must not need each other either.
 */
function folderGraph(g: ReadonlyMap<string, readonly string[]>): Map<string, string[]> {
  const folderOf = (f: string) => (f.includes('/') ? f.slice(0, f.indexOf('/')) : null);
  const out = new Map<string, Set<string>>();
  for (const [from, tos] of g) {
    const a = folderOf(from);
    if (a === null) continue;
    for (const to of tos) {
      const b = folderOf(to);
      if (b !== null && b !== a) out.set(a, (out.get(a) ?? new Set()).add(b));
    }
  }
  return new Map([...out].map(([k, v]) => [k, [...v]]));
}

describe('import graph of src/', () => {
  test('every file is in a layer', () => {
    expect([...graph.keys()].filter((f) => layerOf(f) < 0)).toEqual([]);
  });

  test('no file imports a higher layer', () => {
    const bad = [...graph].flatMap(([from, tos]) =>
      tos
        .filter((to) => layerOf(to) > layerOf(from))
        .map((to) => `${from} (${NAMES[layerOf(from)]}) → ${to} (${NAMES[layerOf(to)]})`),
    );
    expect(bad).toEqual([]);
  });

  test('no cycles', () => {
    expect(cyclesOf(graph)).toEqual([]);
  });

  test('no cycles between folders', () => {
    expect(cyclesOf(folderGraph(graph))).toEqual([]);
  });

  test("graphql/: only the schema assembly imports the faces in fields/, and a face no other capability's", () => {
    const isFace = (f: string) => f.startsWith('graphql/fields/');
    const capabilityOf = (f: string) => f.slice('graphql/fields/'.length).replace(/(-.*)?\.ts$/, '');
    const bad = [...graph].flatMap(([from, tos]) =>
      tos
        .filter(isFace)
        .filter((to) =>
          isFace(from)
            ? capabilityOf(from) !== capabilityOf(to)
            : from.startsWith('graphql/') &&
              !['graphql/schema.ts', 'graphql/model-types.ts', 'graphql/model-inputs.ts'].includes(from),
        )
        .map((to) => `${from} → ${to}`),
    );
    expect(bad).toEqual([]);
    expect([...graph.keys()].filter(isFace).length).toBeGreaterThan(0);
  });
});

describe('import graph of studio/', () => {
  test('is read (the walk sees the editor)', () => {
    expect(studio.get('editor/fields.tsx')).toContain('editor/richtext.tsx');
  });

  test('no cycles', () => {
    expect(cyclesOf(studio)).toEqual([]);
  });

  test('no cycles between folders', () => {
    expect(cyclesOf(folderGraph(studio))).toEqual([]);
  });
});
