// The console's page frame: navigation, a little CSS, the one inline script (allowed by its nonce alone: the
// Content-Security-Policy lets no other script run, so even a value that escaped escaping could not).
import { html, trusted, type SafeHtml } from './html.ts';
import { CONSOLE_SCRIPT } from './script.ts';

export interface PageFrame {
  /** Under which path the pages are served, e.g. `/console`. */
  base: string;
  /** The current tab's path below `base` ('' for the first). */
  active: string;
  title: string;
  /** What runs in this process, for the header: 'dev session', 'emulator', 'daemon status'. */
  mode: string;
  tabs: readonly { path: string; label: string }[];
  nonce: string;
}

const CSS = `
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1b1b1b; background: #fafafa; }
header { background: #263238; color: white; padding: 8px 16px; display: flex; gap: 24px; align-items: baseline; }
header h1 { font-size: 16px; margin: 0; }
nav a { color: #cfd8dc; margin-right: 16px; text-decoration: none; }
nav a[aria-current] { color: white; border-bottom: 2px solid #80cbc4; }
main { padding: 12px 16px; max-width: 1200px; }
section { margin-bottom: 24px; }
h2 { font-size: 15px; margin: 16px 0 8px; }
table { border-collapse: collapse; background: white; width: 100%; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #eceff1; font-weight: 600; }
pre { margin: 0; white-space: pre-wrap; word-break: break-word; font-size: 12px; }
details > summary { cursor: pointer; }
.status-COMPLETED { color: #2e7d32; font-weight: 600; }
.status-FAILED { color: #c62828; font-weight: 600; }
.status-IN_PROGRESS { color: #ef6c00; font-weight: 600; }
.status-TIMED_OUT { color: #6a1b9a; font-weight: 600; }
.note { color: #555; background: #fff8e1; border: 1px solid #ffe082; padding: 6px 10px; }
.form-error { color: #c62828; font-weight: 600; }
form.inline { display: inline; }
textarea { font: 12px monospace; width: 100%; }
.attempt, .attempt-after { border-left: 3px solid #b0bec5; margin: 6px 0; padding-left: 8px; }
.log { font: 12px monospace; }
.log .level-warn, .log .level-error { color: #c62828; }
.bar { width: 200px; height: 12px; }
`;

export function page(frame: PageFrame, body: SafeHtml): string {
  const tabs = frame.tabs.map(
    (tab) =>
      html`<a
        href="${frame.base}${tab.path === '' ? '' : `/${tab.path}`}"
        ${tab.path === frame.active ? html`aria-current="page"` : ''}
        >${tab.label}</a
      >`,
  );
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>${frame.title} · df-worker</title>
        <style>
          ${CSS}
        </style>
      </head>
      <body>
        <header>
          <h1>df-worker · ${frame.mode}</h1>
          <nav>${tabs}</nav>
        </header>
        <main>${body}</main>
        <script nonce="${frame.nonce}">
          ${trusted(CONSOLE_SCRIPT)};
        </script>
      </body>
    </html> `.text;
}

/** The headers of every page: no caching, no sniffing, no framing, and only the page's own script runs. */
export function pageHeaders(nonce: string): Record<string, string> {
  return {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'content-security-policy':
      `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'unsafe-inline'; img-src 'self' data:; ` +
      "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  };
}
