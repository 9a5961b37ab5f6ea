import { describe, expect, setDefaultTimeout, test } from 'bun:test';

// argon2id at low priority on a loaded box is slow: never a reason to fail.
setDefaultTimeout(60_000);
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { hashPassword, verifyPassword } from '../../src/identity/passwords.ts';

describe('password hashing', () => {
  test('argon2id with OWASP parameters; right, wrong and malformed', async () => {
    const h = await hashPassword('correct horse battery');
    expect(h).toStartWith('$argon2id$v=19$m=19456,t=2,p=1$');
    expect(await verifyPassword('correct horse battery', h)).toBe(true);
    expect(await verifyPassword('wrong horse battery', h)).toBe(false);
    expect(await verifyPassword('anything', 'not a hash')).toBe(false);
    // Hashes made with other parameters (Bun's default, older accounts) still verify.
    expect(
      await verifyPassword('old account pw', await Bun.password.hash('old account pw', { algorithm: 'argon2id' })),
    ).toBe(true);
  });

  test('many at once all complete, each right', async () => {
    const hashes = await Promise.all(Array.from({ length: 6 }, (_, i) => hashPassword(`password number ${i}`)));
    const checks = await Promise.all(hashes.map((h, i) => verifyPassword(`password number ${i}`, h)));
    expect(checks).toEqual(Array(6).fill(true));
  });

  test.skipIf(!existsSync('/proc/self/task'))(
    'the hashing runs on a thread of lower priority than the request thread (nice 10)',
    async () => {
      await hashPassword('warm the hasher up');
      const nices = readdirSync('/proc/self/task').map((tid) => {
        const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
        // Fields after the command name (which may hold spaces): state is field 3, nice field 19.
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
      });
      expect(nices).toContain(10);
      expect(Number(readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ')[16])).toBe(0);
    },
  );
});
