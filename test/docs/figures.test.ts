// The costs the guides quote (a handler worker's memory, its first attempt, the daemon's own) come from one measurement: the bench
// writes bench/figures.json, `npm run docs` copies each figure into the guides' figure blocks, and a guide that
// quotes such a cost in its own words fails here, so two guides cannot give two figures again.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIGURE_BLOCK, quoteFigure, readFigures, renderFigures } from '../../src/docs/figures.ts';
import { REPO_ROOT } from '../cli/run-cli.ts';

// The user guides. CONTRIBUTING.md is left out on purpose: it keeps the measurement history, each figure as it was
// measured then (a daemon with 20 tasks, the code of the day), which is not a quote of today's cost.
const GUIDES = [
  'README.md',
  'handlers/README.md',
  'config/README.md',
  'helm/README.md',
  'helm/CLUSTERING.md',
];

const read = (file: string) => readFile(path.join(REPO_ROOT, file), 'utf8');

/**
 * Ways a guide has quoted a cost by hand: a worker's memory, the pod-sizing formula and the daemon's allowance in
 * it, a new worker's first attempt.
 */
const HAND_QUOTED_COSTS = [
  /\d[\d.,]*\s*MB (?:less |more )?per (?:warm |idle |new )?(?:handler )?(?:worker|process|thread)/i,
  /\b(?:worker|process|thread)s?\b[^.|()]{0,30}?\b(?:costs?|holds?|carr(?:y|ies)|adds?|takes?|uses?|with)\b[^.|()]{0,20}?[~≈]?\d[\d.,]*\s*MB/i,
  /DF_HANDLER_MEMORY_MB`?\s*\+\s*\d/,
  /\bplus (?:about |~|some )?\d[\d.,]*\s*MB\b/i,
  /first attempt[^.|()]{0,30}?\d[\d.]*(?:[–-]\d[\d.]*)?\s*(?:s|ms)\b/i,
];

/** The prose of a guide with its figure blocks and code blocks taken out, on one line. */
function handWritten(markdown: string): string {
  return markdown
    .replace(FIGURE_BLOCK, 'FIGURE')
    .replace(/```[\s\S]*?```/g, '')
    .replace(/\s+/g, ' ');
}

function handQuotedCosts(markdown: string): string[] {
  const text = handWritten(markdown);
  return HAND_QUOTED_COSTS.flatMap((pattern) => {
    const match = new RegExp(pattern.source, `${pattern.flags}g`);
    return [...text.matchAll(match)].map((m) => text.slice(Math.max(0, m.index - 40), m.index + m[0].length));
  });
}

describe('figure blocks', () => {
  it('are filled from bench/figures.json, whole MB and seconds from 100 ms', () => {
    const figures = {
      'a-mb': { value: 45.6, unit: 'MB' as const },
      'b-ms': { value: 284, unit: 'ms' as const },
      'c-ms': { value: 0.052, unit: 'ms' as const },
    };
    const stored = Object.fromEntries(
      Object.entries(figures).map(([name, f]) => [
        name,
        { ...f, meaning: '', command: '', measuredOn: '', machine: '' },
      ]),
    );
    const text = 'x <!-- figure:a-mb -->50 MB<!-- /figure -->, <!-- figure:b-ms -->?<!-- /figure -->, ';
    expect(renderFigures(`${text}<!-- figure:c-ms --><!-- /figure -->`, stored)).toBe(
      'x <!-- figure:a-mb -->46 MB<!-- /figure -->, <!-- figure:b-ms -->0.3 s<!-- /figure -->, ' +
        '<!-- figure:c-ms -->0.05 ms<!-- /figure -->',
    );
    expect(() => renderFigures('<!-- figure:nope-mb -->1 MB<!-- /figure -->', stored)).toThrow(
      'no figure "nope-mb" in bench/figures.json',
    );
    expect(quoteFigure({ value: 101.2, unit: 'MB' })).toBe('101 MB');
  });

  it('name figures that a bench measured, with a command that exists', async () => {
    const scripts = (JSON.parse(await read('package.json')) as { scripts: Record<string, string> }).scripts;
    const figures = readFigures();
    expect(Object.keys(figures)).toEqual(
      expect.arrayContaining([
        'process-worker-private-mb',
        'process-worker-rss-mb',
        'thread-worker-mb',
        'daemon-peak-rss-mb',
      ]),
    );
    for (const [name, figure] of Object.entries(figures)) {
      const script = /^npm run (\S+)/.exec(figure.command)?.[1];
      expect(script !== undefined && script in scripts, `${name}: ${figure.command}`).toBe(true);
      expect(Number.isFinite(figure.value), name).toBe(true);
    }
  });
});

describe('a handler worker cost in the guides', () => {
  it('is recognised when written by hand, whatever the wording', () => {
    const quotes = [
      '| +0.14 ms p50; 89 MB per warm process; first attempt 0.4 s |',
      'runs each worker as a thread of the daemon’s process instead, about 65 MB less per worker, but',
      'fails only its attempt; each process costs about 50 MB while it lives)',
      'each worker process also carries about 50 MB of Node.js itself',
      'Up to `DF_CONCURRENCY` workers run at once, each with about 50 MB of Node.js itself',
      'size the pod for `DF_CONCURRENCY × (DF_HANDLER_MEMORY_MB + 50 MB)` plus about 100 MB',
      'the next attempt starts a new one (its first attempt takes 0.1–0.4 s more)',
      'a process worker costs ~40 MB',
      '`DF_CONCURRENCY × (DF_HANDLER_MEMORY_MB + 50)` plus ~100 MB for the daemon',
    ];
    for (const quote of quotes) expect(handQuotedCosts(quote), quote).not.toEqual([]);
    // Other memory figures near the word "worker" are not a worker's cost.
    const compileCache =
      'reused by the handler workers and the next start, which then polls about 100 ms sooner and holds about 15 MB less';
    expect(handQuotedCosts(compileCache)).toEqual([]);
    expect(handQuotedCosts('each with about <!-- figure:a-mb -->46 MB<!-- /figure --> of')).toEqual([]);
  });

  it.each(GUIDES)('%s quotes it only from a figure block (`npm run docs` fills them)', async (file) => {
    expect(handQuotedCosts(await read(file))).toEqual([]);
  });

  it.each(GUIDES)('%s never starts a line with a figure block', async (file) => {
    // A line that starts with `<!--` opens an HTML block: the paragraph breaks there and the rest of the line is
    // shown raw, Markdown unread.
    const lines = (await read(file)).split('\n').filter((line) => /^\s*(?:[-*] )?<!-- figure:/.test(line));
    expect(lines).toEqual([]);
  });

  it('is quoted by the guides that size a pod or compare the isolation modes', async () => {
    for (const file of ['handlers/README.md', 'helm/README.md']) {
      const names = [...(await read(file)).matchAll(FIGURE_BLOCK)].map((m) => m[1]);
      expect(names, file).toEqual(
        expect.arrayContaining(['process-worker-private-mb', 'daemon-peak-rss-mb']),
      );
    }
  });
});
