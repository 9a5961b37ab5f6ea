import { describe, expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/**
 * The import graph of src/ (docs/architecture.md): a file may import its own layer or a lower
 * one, never a higher one, and no chain of imports (type-only ones included) comes back to
 * where it started.
 */
const SRC = resolve(import.meta.dir, '../../src');
const LAYERS: [number, RegExp][] = [
  [4, /^(main|server)\.ts$/], // entry points: start listeners
  [3, /^(http|cli)\//], // adapters: HTTP listeners, the CLI (talks HTTP)
  [2, /^service\.ts$/], // the composition root
  [1, /^(auth|projects|content|config|identity|secrets|operations|realtime|collab|files|control|graphql|fleet|studio|billing|search|apps|editorial)\//], // capabilities
  [0, /^(actors|store|metrics)\/|^(errors|ids|env|root-token|gateway-module)\.ts$/], // runtime and foundations
];
const NAMES = ['foundation', 'capability', 'service', 'adapter', 'entry'];

const files = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
const layerOf = (rel: string): number => LAYERS.find(([, re]) => re.test(rel))?.[0] ?? -1;
const graph = new Map<string, string[]>();
for (const file of files(SRC)) {
  const text = readFileSync(file, 'utf8');
  const specs = [...text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^'"`;]*?from\s+['"](\.[^'"]+)['"]|import\(\s*['"](\.[^'"]+)['"]\s*\)/g)].map((m) => m[1] ?? m[2]!);
  graph.set(relative(SRC, file), specs.map((s) => relative(SRC, resolve(dirname(file), s))).filter((t) => t.endsWith('.ts')));
}

describe('import graph of src/', () => {
  test('every file is in a layer', () => {
    expect([...graph.keys()].filter((f) => layerOf(f) < 0)).toEqual([]);
  });

  test('no file imports a higher layer', () => {
    const bad = [...graph].flatMap(([from, tos]) => tos.filter((to) => layerOf(to) > layerOf(from)).map((to) => `${from} (${NAMES[layerOf(from)]}) → ${to} (${NAMES[layerOf(to)]})`));
    expect(bad).toEqual([]);
  });

  test('no cycles', () => {
    const state = new Map<string, 'open' | 'done'>();
    const cycles: string[] = [];
    const visit = (f: string, path: string[]) => {
      if (state.get(f) === 'done') return;
      if (state.get(f) === 'open') return void cycles.push([...path.slice(path.indexOf(f)), f].join(' → '));
      state.set(f, 'open');
      for (const t of graph.get(f) ?? []) visit(t, [...path, f]);
      state.set(f, 'done');
    };
    for (const f of graph.keys()) visit(f, []);
    expect(cycles).toEqual([]);
  });
});
