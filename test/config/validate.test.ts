import { describe, expect, test } from 'bun:test';
import { validateConfig } from '../../src/config/validate.ts';
import { field, select, text } from '../../src/config/helpers.ts';
import { cronProblem, isTimeZone } from '../../src/operations/cron.ts';
import { loadConfig } from '../../src/config/load.ts';
import { folder } from './support.ts';

const paths = (input: unknown) => validateConfig(input).errors.map((e) => e.path);
const base = { key: 'k', name: 'n' };

describe('svc/config helpers', () => {
  test('field({ type: select }) throws naming the select helper', () => {
    expect(() => field({ key: 'c', type: 'select' } as never)).toThrow(/select helper/);
    expect(select({ key: 'c', optionModelKey: 'cat', multiple: true })).toEqual({
      key: 'c',
      type: 'select',
      config: { optionModelKey: 'cat', multiple: true },
    });
    expect(text({ key: 't', widget: 'textarea' })).toEqual({ key: 't', type: 'text', config: { widget: 'textarea' } });
  });

  test('svc/config resolves in a folder without node_modules', async () => {
    const dir = folder({
      'svc.config.ts':
        "import { defineConfig, text } from 'svc/config';\nexport default defineConfig({ key: 'a', name: 'b', models: [{ key: 'm', name: 'M', fields: [text({ key: 't' })] }] });\n",
    });
    const loaded = await loadConfig(dir);
    expect((loaded.config as { models: unknown[] }).models).toHaveLength(1);
  });

  test('a config that throws while loading shows file, line and message', async () => {
    const dir = folder({
      'svc.config.ts':
        "import { defineConfig } from 'svc/config';\n\nthrow new Error('boom here');\nexport default defineConfig({ key: 'a', name: 'b' });\n",
    });
    await expect(loadConfig(dir)).rejects.toThrow(/svc\.config\.ts:3:\d+: boom here/);
  });
});

describe('validation reports every error with a path', () => {
  test('required fields, field types and enum options', () => {
    expect(
      paths({
        models: [
          {
            key: 'm',
            fields: [
              { key: 'a', type: 'bogus' },
              { key: 'b', type: 'enum', config: { options: [] } },
            ],
          },
        ],
      }),
    ).toEqual(['key', 'name', 'models[0].name', 'models[0].fields[0].type', 'models[0].fields[1].config.options']);
  });

  test('select needs optionModelKey naming a model', () => {
    const r = validateConfig({
      ...base,
      models: [
        { key: 'a', name: 'A', fields: [{ key: 'x', type: 'text' }] },
        { key: 'b', name: 'B', fields: [] },
        { key: 'c', name: 'C', fields: [{ key: 's', type: 'select', config: { optionModelKey: 'nope' } }] },
      ],
    });
    expect(r.errors).toEqual([
      {
        path: 'models[2].fields[0].config.optionModelKey',
        message: 'optionModelKey names "nope", which is not a model of this config',
      },
    ]);
  });

  test('access.write principals come from the five and are non-empty', () => {
    expect(
      paths({
        ...base,
        models: [
          {
            key: 'a',
            name: 'A',
            fields: [
              { key: 'x', type: 'text', access: { write: [] } },
              { key: 'y', type: 'text', access: { write: ['root'] } },
            ],
          },
        ],
      }),
    ).toEqual(['models[0].fields[0].access.write', 'models[0].fields[1].access.write[0]']);
  });

  test('lookups keyBy must name real fields', () => {
    expect(
      paths({
        ...base,
        models: [
          { key: 'a', name: 'A', fields: [{ key: 'slug', type: 'text' }], lookups: [{ keyBy: ['slug', 'nope'] }] },
        ],
      }),
    ).toEqual(['models[0].lookups[0].keyBy[1]']);
  });

  test('hook events, cron expressions and IANA time zones', () => {
    expect(
      paths({
        ...base,
        operations: [{ key: 'op', endpoint: 'https://x.example/op' }],
        hooks: [{ key: 'h', event: 'RECORD_EXPLODED', operationKey: 'op' }],
        schedules: [{ operationKey: 'op', cron: '61 * * * *', timezone: 'Mars/Olympus' }],
      }),
    ).toEqual(['hooks[0].event', 'schedules[0].cron', 'schedules[0].timezone']);
    expect(cronProblem('*/15 9-17 * * MON-FRI')).toBeNull();
    expect(cronProblem('@daily', 'Europe/Berlin')).toBeNull();
    expect(cronProblem('* * *')).toContain('has 3 fields');
    // Parses, but February has no 31st: refused rather than kept waiting forever.
    expect(cronProblem('0 0 31 2 *')).toBe('cron expression "0 0 31 2 *" never fires');
    expect(isTimeZone('Europe/Berlin')).toBe(true);
  });

  test('relying party allowedOrigins are exact https origins and redirect URIs are checked', () => {
    const r = validateConfig({
      ...base,
      relyingParties: [
        {
          clientId: 'web',
          name: 'Web',
          redirectUris: ['https://a.example/cb', 'ftp://x', 'https://*.a.example/cb'],
          allowedOrigins: [
            'https://a.example',
            'http://a.example',
            'https://*.a.example',
            'https://a.example/path',
            'https://a.example:443',
            'https://a.example:8443',
          ],
        },
      ],
    });
    expect(r.errors.map((e) => e.path)).toEqual([
      'relyingParties[0].redirectUris[1]',
      'relyingParties[0].redirectUris[2]',
      'relyingParties[0].allowedOrigins[1]',
      'relyingParties[0].allowedOrigins[2]',
      'relyingParties[0].allowedOrigins[3]',
      'relyingParties[0].allowedOrigins[4]',
    ]);
  });

  test('design token $value and $type, and references', () => {
    expect(
      paths({
        ...base,
        designTokens: {
          color: { $type: 'colour', a: { $value: '#fff' } },
          size: {
            $type: 'dimension',
            b: { $value: 'big' },
            c: { $value: '{size.missing}' },
            d: { $type: 'dimension' },
          },
        },
      }),
    ).toEqual([
      'designTokens.color.$type',
      'designTokens.size.b.$value',
      'designTokens.size.d.$value',
      'designTokens.size.c.$value',
    ]);
  });

  test('duplicate keys are reported', () => {
    expect(
      paths({
        ...base,
        models: [
          {
            key: 'a',
            name: 'A',
            fields: [
              { key: 'x', type: 'text' },
              { key: 'x', type: 'text' },
            ],
          },
          { key: 'a', name: 'A2', fields: [] },
        ],
        customerRoles: [
          { key: 'r', name: 'R', permissions: [] },
          { key: 'r', name: 'R', permissions: [] },
        ],
      }),
    ).toEqual(['models[1].key', 'models[0].fields[1].key', 'customerRoles[1].key']);
  });

  test('unknown extra fields pass through', () => {
    const r = validateConfig({
      ...base,
      somethingNew: { a: 1 },
      models: [{ key: 'a', name: 'A', fields: [{ key: 'x', type: 'text', hint: 'extra' }], color: 'red' }],
    });
    expect(r.errors).toEqual([]);
    expect((r.config as Record<string, unknown>).somethingNew).toEqual({ a: 1 });
  });
});
