// The month's pace as a small SVG drawn on the server: requests used so far (as sampled while the console ran,
// and now) against the even-pace line that spends the month's limit evenly from its first to its last instant.
import { escapeHtml } from './html.ts';

export interface MonthChartInput {
  startsAt: number;
  endsAt: number;
  limit: number;
  /** [instant ms, requests used by then], oldest first: what the console saw; the month before it is not known. */
  samples: readonly (readonly [number, number])[];
  nowMs: number;
  used: number;
}

const WIDTH = 560;
const HEIGHT = 220;
const PAD = { left: 56, right: 16, top: 16, bottom: 32 };

/** The requests an even spend of the month allows by `nowMs`. */
export function evenPaceAt(
  input: Pick<MonthChartInput, 'startsAt' | 'endsAt' | 'limit'>,
  nowMs: number,
): number {
  const share = (nowMs - input.startsAt) / (input.endsAt - input.startsAt);
  return Math.round(input.limit * Math.min(1, Math.max(0, share)));
}

export function monthPaceChart(input: MonthChartInput): string {
  const { startsAt, endsAt, nowMs } = input;
  const limit = Number.isFinite(input.limit) && input.limit > 0 ? input.limit : Math.max(1, input.used * 2);
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const x = (ms: number) => PAD.left + ((ms - startsAt) / (endsAt - startsAt)) * plotW;
  const y = (used: number) => PAD.top + plotH - (Math.min(used, limit) / limit) * plotH;
  const f = (n: number) => n.toFixed(1);
  const pace = evenPaceAt({ startsAt, endsAt, limit }, nowMs);
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="sans-serif" font-size="11">`,
    `<title>${escapeHtml(`${input.used} requests used this month; an even pace allows ${pace} by now`)}</title>`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="white"/>`,
  ];
  for (let i = 0; i <= 4; i++) {
    const value = (limit * i) / 4;
    parts.push(
      `<line x1="${PAD.left}" y1="${f(y(value))}" x2="${WIDTH - PAD.right}" y2="${f(y(value))}" stroke="#e3e3e3"/>`,
      `<text x="${PAD.left - 6}" y="${f(y(value) + 4)}" text-anchor="end">${Math.round(value)}</text>`,
    );
  }
  const days = Math.round((endsAt - startsAt) / 86_400_000);
  for (const day of [1, 8, 15, 22, days]) {
    const at = startsAt + (day - 1) * 86_400_000;
    parts.push(`<text x="${f(x(at))}" y="${HEIGHT - 12}" text-anchor="middle">day ${day}</text>`);
  }
  parts.push(
    `<line class="even-pace" x1="${f(x(startsAt))}" y1="${f(y(0))}" x2="${f(x(endsAt))}" y2="${f(y(limit))}" stroke="#888" stroke-dasharray="5,4"/>`,
    `<line x1="${f(x(nowMs))}" y1="${PAD.top}" x2="${f(x(nowMs))}" y2="${PAD.top + plotH}" stroke="#bbb"/>`,
  );
  const points = [
    ...input.samples.filter(([at]) => at >= startsAt && at < nowMs),
    [nowMs, input.used] as const,
  ];
  if (points.length > 1) {
    const d = points.map(([at, used], i) => `${i === 0 ? 'M' : 'L'}${f(x(at))},${f(y(used))}`).join('');
    parts.push(`<path class="used" d="${d}" fill="none" stroke="#1565c0" stroke-width="2"/>`);
  }
  parts.push(
    `<circle class="used-now" cx="${f(x(nowMs))}" cy="${f(y(input.used))}" r="4" fill="#1565c0"/>`,
    `<circle cx="${f(x(nowMs))}" cy="${f(y(pace))}" r="3" fill="#888"/>`,
    `<rect x="${PAD.left + 8}" y="${PAD.top + 4}" width="12" height="3" fill="#1565c0"/>`,
    `<text x="${PAD.left + 24}" y="${PAD.top + 9}">used: ${input.used}</text>`,
    `<rect x="${PAD.left + 8}" y="${PAD.top + 18}" width="12" height="3" fill="#888"/>`,
    `<text x="${PAD.left + 24}" y="${PAD.top + 23}">even pace: ${pace} by now, ${limit} by the month's end</text>`,
    '</svg>',
  );
  return parts.join('\n');
}

/** Samples of the month's usage, at most one per `everyMs` and `max` in all (every other one dropped when full). */
export class UsageSamples {
  readonly #samples: [number, number][] = [];
  readonly #everyMs: number;
  readonly #max: number;

  constructor(everyMs = 5_000, max = 400) {
    this.#everyMs = everyMs;
    this.#max = max;
  }

  add(atMs: number, used: number): void {
    const last = this.#samples.at(-1);
    if (last && atMs - last[0] < this.#everyMs && used === last[1]) return;
    if (last && used < last[1]) this.#samples.length = 0; // a new month
    this.#samples.push([atMs, used]);
    if (this.#samples.length > this.#max) {
      const kept = this.#samples.filter((_, i) => i % 2 === 0);
      this.#samples.splice(0, this.#samples.length, ...kept);
    }
  }

  get all(): readonly (readonly [number, number])[] {
    return this.#samples;
  }
}
