// Calendar months in a time zone: the monthly quota resets at the first instant of each month there
// (UTC by default). Only Intl is used, so any IANA zone Node knows works, daylight-saving shifts included.

export interface MonthWindow {
  /** `YYYY-MM` in the configured time zone. */
  key: string;
  startMs: number;
  endMs: number;
}

export function monthWindow(nowMs: number, timeZone = 'UTC'): MonthWindow {
  const { year, month } = calendarMonth(nowMs, timeZone);
  return calendarMonthWindow(year, month, timeZone);
}

/** The window of a given calendar month (`month` 1..12) in the time zone. */
export function calendarMonthWindow(year: number, month: number, timeZone = 'UTC'): MonthWindow {
  const startMs = zonedStartOfMonth(year, month, timeZone);
  const next = month === 12 ? { year: year + 1, month: 1 } : { year, month: month + 1 };
  const endMs = zonedStartOfMonth(next.year, next.month, timeZone);
  return { key: `${year}-${String(month).padStart(2, '0')}`, startMs, endMs };
}

/** Reads a `YYYY-MM` month key; undefined when the text is not one. */
export function parseMonthKey(key: string): { year: number; month: number } | undefined {
  const match = /^(\d{4})-(\d{2})$/.exec(key);
  if (!match) return undefined;
  const month = Number(match[2]);
  if (month < 1 || month > 12) return undefined;
  return { year: Number(match[1]), month };
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

function zonedParts(ms: number, timeZone: string): Record<string, number> {
  if (timeZone === 'UTC') {
    // The default zone needs no Intl: touching its time zone data (ICU) costs the daemon about 6 MB of
    // resident memory (bench:footprint's smaps, UTC against Europe/Paris).
    const d = new Date(ms);
    return {
      year: d.getUTCFullYear(),
      month: d.getUTCMonth() + 1,
      day: d.getUTCDate(),
      hour: d.getUTCHours(),
      minute: d.getUTCMinutes(),
      second: d.getUTCSeconds(),
    };
  }
  const parts: Record<string, number> = {};
  for (const p of formatter(timeZone).formatToParts(ms)) {
    if (p.type !== 'literal') parts[p.type] = Number(p.value);
  }
  return parts;
}

function calendarMonth(ms: number, timeZone: string): { year: number; month: number } {
  const p = zonedParts(ms, timeZone);
  return { year: p.year ?? 1970, month: p.month ?? 1 };
}

/** Offset of the zone from UTC at an instant, in ms (positive east of Greenwich). */
function zoneOffsetMs(ms: number, timeZone: string): number {
  const p = zonedParts(ms, timeZone);
  const asUtc = Date.UTC(
    p.year ?? 1970,
    (p.month ?? 1) - 1,
    p.day ?? 1,
    p.hour ?? 0,
    p.minute ?? 0,
    p.second ?? 0,
  );
  return asUtc - Math.floor(ms / 1000) * 1000;
}

/**
 * First instant of the 1st of the month in the zone. That is midnight, except where a daylight-saving
 * change skips midnight (America/Asuncion on 2023-10-01 goes from 23:59:59 to 01:00): then it is the first
 * instant of the 1st that exists, so every instant still on the last day of the previous month stays in it.
 */
function zonedStartOfMonth(year: number, month: number, timeZone: string): number {
  const wall = Date.UTC(year, month - 1, 1);
  // Two passes settle the offset even when a DST change lies between the guess and the answer.
  let guess = wall - zoneOffsetMs(wall, timeZone);
  guess = wall - zoneOffsetMs(guess, timeZone);
  const target = year * 12 + month;
  const reached = (ms: number): boolean => {
    const { year: y, month: m } = calendarMonth(ms, timeZone);
    return y * 12 + m >= target;
  };
  if (reached(guess) && !reached(guess - 1)) return guess;
  // Midnight does not exist (or exists twice): search the change of month. Zone offsets lie within
  // -12 h..+14 h, so two days on either side of the UTC midnight hold it.
  let before = wall - 2 * 86_400_000;
  let after = wall + 2 * 86_400_000;
  while (after - before > 1) {
    const middle = Math.floor((before + after) / 2);
    if (reached(middle)) after = middle;
    else before = middle;
  }
  return after;
}
