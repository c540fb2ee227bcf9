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
  const startMs = zonedMidnightFirstOfMonth(year, month, timeZone);
  const next = month === 12 ? { year: year + 1, month: 1 } : { year, month: month + 1 };
  const endMs = zonedMidnightFirstOfMonth(next.year, next.month, timeZone);
  return { key: `${year}-${String(month).padStart(2, '0')}`, startMs, endMs };
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

function zonedMidnightFirstOfMonth(year: number, month: number, timeZone: string): number {
  const wall = Date.UTC(year, month - 1, 1);
  // Two passes settle the offset even when a DST change lies between the guess and the answer.
  let guess = wall - zoneOffsetMs(wall, timeZone);
  guess = wall - zoneOffsetMs(guess, timeZone);
  return guess;
}
