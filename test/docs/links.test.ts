// Every relative link and #anchor in the front page and the guides resolves: the file exists, and the anchor is a
// heading's slug as GitHub makes it (or an explicit id), so moving a section cannot silently break a link to it.
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../cli/run-cli.ts';

const DOCS = [
  'README.md',
  'handlers/README.md',
  'config/README.md',
  'helm/README.md',
  '.github/CONTRIBUTING.md',
];

/** The text outside fenced code blocks, line by line (code blocks become empty lines, so line numbers hold). */
function proseLines(markdown: string): string[] {
  let fence: string | undefined;
  return markdown.split('\n').map((line) => {
    const marker = /^\s*(```+|~~~+)/.exec(line)?.[1];
    if (marker !== undefined && (fence === undefined || marker.startsWith(fence))) {
      fence = fence === undefined ? marker : undefined;
      return '';
    }
    return fence === undefined ? line : '';
  });
}

/** GitHub's anchor for a heading: its text as rendered, lower-cased, punctuation but `-` and `_` dropped, spaces as `-`. */
export function githubSlug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .replace(/`/g, '');
  return text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
    .replace(/ /g, '-');
}

/** Every anchor a Markdown file offers: heading slugs (repeats numbered -1, -2... as GitHub does) and explicit ids. */
function anchors(markdown: string): Set<string> {
  const found = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of proseLines(markdown)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading !== undefined) {
      const slug = githubSlug(heading);
      const count = seen.get(slug) ?? 0;
      seen.set(slug, count + 1);
      found.add(count === 0 ? slug : `${slug}-${count}`);
    }
    for (const match of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) found.add(match[1]!);
  }
  return found;
}

interface Link {
  file: string;
  line: number;
  target: string;
}

function links(file: string, markdown: string): Link[] {
  const found: Link[] = [];
  proseLines(markdown).forEach((text, index) => {
    const prose = text.replace(/`[^`]*`/g, (code) => ' '.repeat(code.length));
    for (const match of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      found.push({ file, line: index + 1, target: match[1]! });
    }
  });
  return found;
}

async function brokenLinks(): Promise<string[]> {
  const texts = new Map<string, string>();
  const read = async (file: string) => {
    if (!texts.has(file)) texts.set(file, await readFile(path.join(REPO_ROOT, file), 'utf8'));
    return texts.get(file)!;
  };
  const broken: string[] = [];
  for (const file of DOCS) {
    for (const link of links(file, await read(file))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(link.target)) continue; // https:, mailto: ...
      const [target = '', anchor] = link.target.split('#', 2);
      const resolved =
        target === '' ? file : path.posix.normalize(path.posix.join(path.posix.dirname(file), target));
      const where = `${link.file}:${link.line}: ${link.target}`;
      if (resolved.startsWith('..') || !existsSync(path.join(REPO_ROOT, resolved))) {
        broken.push(`${where} (no file ${resolved})`);
        continue;
      }
      if (anchor === undefined) continue;
      if (!resolved.endsWith('.md')) broken.push(`${where} (an anchor into a file that is not Markdown)`);
      else if (!anchors(await read(resolved)).has(anchor))
        broken.push(`${where} (no heading #${anchor} in ${resolved})`);
    }
  }
  return broken;
}

describe('links in the README and the guides', () => {
  it('makes anchors as GitHub does', () => {
    expect(githubSlug('Kubernetes (Helm chart `helm/df-worker`)')).toBe(
      'kubernetes-helm-chart-helmdf-worker',
    );
    expect(githubSlug('Guarantees, and their limits')).toBe('guarantees-and-their-limits');
    expect(githubSlug('Calling the service from a handler: `ctx.service`')).toBe(
      'calling-the-service-from-a-handler-ctxservice',
    );
    expect(githubSlug('CI: `.ci/run`')).toBe('ci-cirun');
    expect(githubSlug('DF_API_URL and [the key](x.md)')).toBe('df_api_url-and-the-key');
    expect([...anchors('# A\n## A\n```\n# not a heading\n```\n<a id="kept"></a>')]).toEqual([
      'a',
      'a-1',
      'kept',
    ]);
  });

  it('finds links outside code, with their line', () => {
    const text = 'See [a](b.md#c) and `[not](a-link)`.\n```\n[in](code)\n```\n![chart](bench/x.svg)';
    expect(links('f.md', text)).toEqual([
      { file: 'f.md', line: 1, target: 'b.md#c' },
      { file: 'f.md', line: 5, target: 'bench/x.svg' },
    ]);
  });

  it('resolves every relative link and #anchor of README.md, the guides and CONTRIBUTING.md', async () => {
    expect(await brokenLinks()).toEqual([]);
  });

  it('links the front page to every guide', async () => {
    const readme = await readFile(path.join(REPO_ROOT, 'README.md'), 'utf8');
    const targets = links('README.md', readme).map((link) => link.target.split('#')[0]);
    expect(targets).toEqual(expect.arrayContaining(DOCS.slice(1)));
  });
});
