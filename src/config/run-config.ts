/**
 * Child-process entry that evaluates a `svc.config.ts` (see load.ts). Running the user's
 * file in its own process keeps the CLI free of module-cache staleness between loads and
 * of whatever side effects the config has. Prints one JSON line on stdout.
 */
import { join } from 'node:path';

const HELPERS = join(import.meta.dir, 'helpers.ts');

// The config folder usually has no node_modules: resolve `svc/config` to this checkout.
Bun.plugin({
  name: 'svc-config-resolver',
  setup(build) {
    // A virtual module: runtime plugins cannot redirect bare specifiers reliably, but they
    // can serve one. The helpers are plain functions, so exporting the loaded object is exact.
    build.module('svc/config', async () => ({
      exports: (await import(HELPERS)) as Record<string, unknown>,
      loader: 'object',
    }));
  },
});

const file = process.argv[2]!;
try {
  const mod = (await import(file)) as { default?: unknown };
  const config = mod.default;
  process.stdout.write(JSON.stringify({ ok: true, config: config === undefined ? null : config }) + '\n');
} catch (err) {
  // Bun's parse errors (BuildMessage) carry `position`; runtime errors carry a stack.
  const e = err as { message?: string; stack?: string; position?: { line?: number; column?: number } | null };
  const position = e?.position ? { line: e.position.line, column: e.position.column } : null;
  process.stdout.write(
    JSON.stringify({ ok: false, message: String(e?.message ?? err), stack: String(e?.stack ?? ''), position }) + '\n',
  );
}
