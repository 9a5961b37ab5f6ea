import { describe, expect, test } from 'bun:test';
import { startTestServer } from '../support/server.ts';

describe('SVC_ROLE selects the listeners', () => {
  test('api runs the API only', async () => {
    const s = await startTestServer({ SVC_ROLE: 'api' });
    try {
      expect(s.apiUrl).toBeString();
      expect(s.gatewayUrl).toBeUndefined();
      expect((await fetch(`${s.apiUrl}/health`)).status).toBe(200);
    } finally {
      await s.stop();
    }
  });

  test('gateway runs the realtime gateway only', async () => {
    const s = await startTestServer({ SVC_ROLE: 'gateway' });
    try {
      expect(s.apiUrl).toBeUndefined();
      expect(await (await fetch(`${s.gatewayUrl}/health`)).json()).toEqual({ status: 'ok' });
    } finally {
      await s.stop();
    }
  });

  test('worker runs no listener but opens the database', async () => {
    const s = await startTestServer({ SVC_ROLE: 'worker' });
    try {
      expect(s.apiUrl).toBeUndefined();
      expect(s.gatewayUrl).toBeUndefined();
      const [row] = await s.svc.sql`select count(*)::int as n from svc_migrations`;
      expect(row?.n).toBeGreaterThan(0);
    } finally {
      await s.stop();
    }
  });

  test('unknown API paths answer a JSON 404', async () => {
    const s = await startTestServer();
    try {
      const res = await fetch(`${s.apiUrl}/nope`);
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ error: 'NOT_FOUND', message: 'No such endpoint' });
    } finally {
      await s.stop();
    }
  });
});
