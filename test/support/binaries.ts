import { accessSync, constants } from 'node:fs';

/**
 * System programs some tests drive: headless Chromium (the Studio and hosted-login pages) and
 * ffmpeg (video posters and HLS). On a box without one, the tests that need it skip, and the run
 * prints one line naming the Debian package to install. CI installs both, so there (CI set) a
 * missing program fails the run instead: a skip in CI would hide tests that never ran.
 */
type Program = 'chromium' | 'ffmpeg';

const SOURCES: Record<Program, { env: string[]; names: string[]; pkg: string }> = {
  // SVC_CHROMIUM (or the common CHROME_PATH) names the browser; else the first of these on PATH.
  chromium: {
    env: ['SVC_CHROMIUM', 'CHROME_PATH'],
    names: ['chromium', 'chromium-browser', 'google-chrome', 'google-chrome-stable'],
    pkg: 'chromium',
  },
  // SVC_FFMPEG is the service's own setting (docs/environment.md); `off` counts as missing.
  ffmpeg: { env: ['SVC_FFMPEG'], names: ['ffmpeg'], pkg: 'ffmpeg' },
};

const executable = (path: string): boolean => {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/** Where the program is, or why not (the env variable that named a missing file, or PATH). */
export function locate(
  program: Program,
  env: Record<string, string | undefined> = process.env,
): { path: string } | { missing: string } {
  const src = SOURCES[program];
  for (const name of src.env) {
    const v = env[name];
    if (!v) continue;
    if (v === 'off') return { missing: `${name}=off` };
    const path = v.includes('/') ? v : Bun.which(v, { PATH: env.PATH ?? '' });
    return path && executable(path) ? { path } : { missing: `${name}=${v} is not an executable file` };
  }
  for (const name of src.names) {
    const path = Bun.which(name, { PATH: env.PATH ?? '' });
    if (path) return { path };
  }
  return { missing: `no ${src.names.join(', ')} on PATH${src.env.length ? ` and ${src.env.join(', ')} unset` : ''}` };
}

/** True when the environment says this is CI (`CI=true`, `CI=1`, as CI services set it). */
export const inCI = (env: Record<string, string | undefined> = process.env): boolean =>
  !!env.CI && env.CI !== 'false' && env.CI !== '0';

const said = new Set<Program>();

/**
 * The program's path, or undefined after printing one line naming the Debian package (once per
 * program and process) — the caller skips its tests (`describe.skipIf(!path)`). With CI set, it
 * throws instead, which fails the test file.
 */
export function need(
  program: Program,
  env: Record<string, string | undefined> = process.env,
  warn: (line: string) => void = console.warn,
): string | undefined {
  const found = locate(program, env);
  if ('path' in found) return found.path;
  const install = `install the Debian package "${SOURCES[program].pkg}" (apt-get install ${SOURCES[program].pkg})`;
  if (inCI(env))
    throw new Error(`${program} not found (${found.missing}) and CI=${env.CI}: CI runs every test, so ${install}`);
  if (!said.has(program) || warn !== console.warn) {
    if (warn === console.warn) said.add(program);
    warn(`skip: ${program} not found (${found.missing}): its tests are skipped; ${install}`);
  }
  return undefined;
}
