/**
 * Five-field cron expressions (minute hour day-of-month month day-of-week), as in crontab(5):
 * `*`, numbers, ranges `a-b`, steps `*\/n` and `a-b/n`, lists `a,b`, month and weekday names,
 * weekday 7 = Sunday, and the `@hourly`-style macros. Returns the parsed sets, or an error
 * sentence naming the offending field.
 */
export interface CronSchedule {
  minutes: number[];
  hours: number[];
  daysOfMonth: number[];
  months: number[];
  daysOfWeek: number[];
  /** Both day fields restricted: a day matches when either does (crontab semantics). */
  dayOr: boolean;
}

const FIELDS = [
  { name: 'minute', min: 0, max: 59 },
  { name: 'hour', min: 0, max: 23 },
  { name: 'day of month', min: 1, max: 31 },
  { name: 'month', min: 1, max: 12, names: ['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG', 'SEP', 'OCT', 'NOV', 'DEC'], base: 1 },
  { name: 'day of week', min: 0, max: 7, names: ['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'], base: 0 },
] as const;

const MACROS: Record<string, string> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

type Field = (typeof FIELDS)[number];

function value(token: string, f: Field): number | null {
  if (/^\d+$/.test(token)) return Number(token);
  if ('names' in f) {
    const i = (f.names as readonly string[]).indexOf(token.toUpperCase());
    if (i !== -1) return i + f.base;
  }
  return null;
}

function parseField(text: string, f: Field): number[] | string {
  const out = new Set<number>();
  for (const part of text.split(',')) {
    const m = /^([^/]+)(?:\/(\d+))?$/.exec(part);
    if (!m) return `"${part}" is not a valid ${f.name} entry`;
    const [, range, stepText] = m;
    const step = stepText === undefined ? 1 : Number(stepText);
    if (step < 1) return `the step in "${part}" must be at least 1`;
    let lo: number;
    let hi: number;
    if (range === '*') {
      lo = f.min;
      hi = f.max === 7 ? 6 : f.max;
    } else {
      const bounds = range!.split('-');
      if (bounds.length > 2) return `"${part}" is not a valid ${f.name} range`;
      const a = value(bounds[0]!, f);
      const b = bounds.length === 2 ? value(bounds[1]!, f) : a;
      if (a === null || b === null) return `"${part}" is not a valid ${f.name} value`;
      if (a < f.min || b > f.max || a > f.max || b < f.min) return `${f.name} ${part} is out of range ${f.min}-${f.max}`;
      if (a > b) return `the ${f.name} range "${part}" runs backwards`;
      lo = a;
      // `5/15` means "from 5 to the end, every 15" as in Vixie cron.
      hi = stepText !== undefined && bounds.length === 1 ? (f.max === 7 ? 6 : f.max) : b;
    }
    for (let v = lo; v <= hi; v += step) out.add(f.max === 7 && v === 7 ? 0 : v);
  }
  return [...out].sort((x, y) => x - y);
}

export function parseCron(expression: string): CronSchedule | { error: string } {
  if (typeof expression !== 'string' || expression.trim() === '') return { error: 'a cron expression is required' };
  const text = MACROS[expression.trim().toLowerCase()] ?? expression.trim();
  const parts = text.split(/\s+/);
  if (parts.length !== 5) {
    return { error: `"${expression}" has ${parts.length} fields; a cron expression has 5 (minute hour day-of-month month day-of-week)` };
  }
  const sets: number[][] = [];
  for (const [i, f] of FIELDS.entries()) {
    const r = parseField(parts[i]!, f);
    if (typeof r === 'string') return { error: `invalid cron expression "${expression}": ${r}` };
    sets.push(r);
  }
  return {
    minutes: sets[0]!,
    hours: sets[1]!,
    daysOfMonth: sets[2]!,
    months: sets[3]!,
    daysOfWeek: sets[4]!,
    dayOr: parts[2] !== '*' && parts[4] !== '*',
  };
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
