// The key's budget: requests used this second, this minute and this month against the limits, and the month's
// pace as a chart. From the worker's budget when a worker runs here (what it spends and paces), else from the
// emulator's count of each key (what the service counted).
import type { KeyUsageFigures } from '../emulator/limits.ts';
import { evenPaceAt, monthPaceChart } from './budget-chart.ts';
import { html, trusted, type SafeHtml } from './html.ts';
import type { ConsoleSources } from './sources.ts';

interface Figures {
  second: { used: number; limit: number };
  minute: { used: number; limit: number };
  month: { used: number; limit: number; startsAt: number; endsAt: number };
}

export function budgetSection(sources: ConsoleSources, nowMs: number): SafeHtml {
  const snapshot = sources.worker?.budget();
  if (snapshot) {
    sources.samples.add(nowMs, snapshot.month.used);
    return html`<section id="budget" data-live>
      <p>The key's budget as the worker spends it (every poll, report and handler call passes it).</p>
      ${figures(snapshot, sources, nowMs)}
      ${snapshot.pausedForMs > 0 && html`<p class="note">Paused by a 429 until ${new Date(nowMs + snapshot.pausedForMs).toISOString()}.</p>`}
      <p>
        Requests waiting for the budget: ${snapshot.waiting}; idle poll pace: one every
        ${Number.isFinite(snapshot.idlePaceMs) ? `${Math.round(snapshot.idlePaceMs / 1000)} s` : '(month spent)'}.
      </p>
    </section>`;
  }
  const keys: KeyUsageFigures[] = sources.service?.usage() ?? [];
  if (keys.length === 0) {
    return html`<section id="budget" data-live><p>No request has reached the service yet.</p></section>`;
  }
  const busiest = keys.reduce((a, b) => (b.month.used > a.month.used ? b : a));
  sources.samples.add(nowMs, busiest.month.used);
  return html`<section id="budget" data-live>
    <p>
      What the emulator counted per API key (the service's side; a worker's own budget shows when one runs
      here).
    </p>
    ${keys.map(
      (k) =>
        html`<h2>Key ${maskKey(k.apiKey)}</h2>
          ${figures(k, k === busiest ? sources : undefined, nowMs)}`,
    )}
  </section>`;
}

function figures(f: Figures, chartSources: ConsoleSources | undefined, nowMs: number): SafeHtml {
  const pace = evenPaceAt(f.month, nowMs);
  const row = (label: string, used: number, limit: number) =>
    html`<tr data-window="${label}">
      <th>${label}</th>
      <td class="used">${used}</td>
      <td>${limitText(limit)}</td>
      <td>${bar(used, limit)}</td>
    </tr>`;
  return html`<table class="budget">
      <thead>
        <tr>
          <th>Window</th>
          <th>Used</th>
          <th>Limit</th>
          <th></th>
        </tr>
      </thead>
      <tbody>
        ${row('this second', f.second.used, f.second.limit)}
        ${row('this minute', f.minute.used, f.minute.limit)} ${row('this month', f.month.used, f.month.limit)}
      </tbody>
    </table>
    <p>
      Month pace: ${f.month.used} used where an even spend of the month allows ${pace} by now
      (${f.month.used <= pace ? 'behind or on pace' : 'ahead of pace'}).
    </p>
    ${chartSources && trusted(monthPaceChart({ ...f.month, samples: chartSources.samples.all, nowMs, used: f.month.used }))}`;
}

function limitText(limit: number): string {
  return limit > 0 && Number.isFinite(limit) ? String(limit) : 'none';
}

function bar(used: number, limit: number): SafeHtml {
  if (!(limit > 0 && Number.isFinite(limit))) return html``;
  const percent = Math.min(100, Math.round((used / limit) * 100));
  return html`<meter class="bar" min="0" max="${limit}" value="${Math.min(used, limit)}" title="${percent}%">
    ${percent}%
  </meter>`;
}

/** An API key shown by its first characters only: enough to tell keys apart, never the key. */
export function maskKey(key: string): string {
  return `${key.slice(0, 3)}…`;
}
