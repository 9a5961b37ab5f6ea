import { Cron } from 'croner';

/**
 * Cron expressions, by `croner` (docs/decisions.md): five fields (minute hour day-of-month
 * month day-of-week) as in crontab(5), names, `L`/`#`/`W`, and IANA time zones with Vixie-cron
 * DST rules (a fixed time in a skipped hour runs right after the gap; a fixed time that occurs
 * twice runs once). Config validation and the scheduler share this module.
 */
const MACROS: Record<string, string> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

function pattern(expression: string): string {
  const text = expression.trim();
  return MACROS[text.toLowerCase()] ?? text;
}

/** A parsed schedule; throws a readable Error for a bad expression or zone. */
export function cronOf(expression: string, timezone = 'UTC'): Cron {
  // sloppyRanges keeps Vixie's `5/15` (from 5, every 15), which configs already use.
  return new Cron(pattern(expression), { mode: '5-part', timezone, paused: true, sloppyRanges: true });
}

/** Why an expression cannot be used (syntax, or it never fires), or null when it is fine. */
export function cronProblem(expression: unknown, timezone = 'UTC'): string | null {
  if (typeof expression !== 'string' || expression.trim() === '') return 'a cron expression is required';
  const fields = pattern(expression).split(/\s+/).length;
  if (fields !== 5)
    return `"${expression}" has ${fields} fields; a cron expression has 5 (minute hour day-of-month month day-of-week)`;
  let cron: Cron;
  try {
    cron = cronOf(expression, isTimeZone(timezone) ? timezone : 'UTC');
  } catch (err) {
    return `invalid cron expression "${expression}": ${(err as Error).message.replace(/^CronPattern: /, '')}`;
  }
  // `0 0 31 2 *` parses but never fires: refuse it instead of keeping a schedule that waits forever.
  if (!cron.nextRun()) return `cron expression "${expression}" never fires`;
  return null;
}

/** The latest occurrence at or before `now`, or null when there is none. */
export function latestOccurrence(cron: Cron, now: Date): Date | null {
  // previousRuns is exclusive of its reference; a fire time equal to `now` counts as due.
  return cron.previousRuns(1, new Date(now.getTime() + 1))[0] ?? null;
}

let zones: Set<string> | undefined;

/** Whether `zone` is an IANA time zone name this runtime knows. */
export function isTimeZone(zone: unknown): boolean {
  if (typeof zone !== 'string' || zone === '') return false;
  zones ??= new Set(Intl.supportedValuesOf('timeZone'));
  if (zones.has(zone) || zone === 'UTC') return true;
  // Aliases (`US/Pacific`, `Etc/GMT+1`) are valid IANA names absent from the canonical list.
  try {
    new Intl.DateTimeFormat('en', { timeZone: zone });
    return zone.includes('/') || /^[A-Z]{3,4}$/.test(zone);
  } catch {
    return false;
  }
}
