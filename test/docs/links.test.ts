// Every relative link and #anchor in the front page and the guides resolves: the file exists, and the anchor is a
// heading's slug as GitHub makes it (or an explicit id), so moving a section cannot silently break a link to it.
// Links the shipped docs make absolute (to this repository's main branch, see shipped-links.test.ts) are checked
// against this checkout the same way.
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../cli/run-cli.ts';
import { anchors, githubSlug, links, repositoryPath } from './markdown.ts';

const DOCS = [
  'README.md',
  'handlers/README.md',
  'config/README.md',
  'helm/README.md',
  '.github/CONTRIBUTING.md',
];

async function brokenLinks(): Promise<string[]> {
  const texts = new Map<string, string>();
  const read = async (file: string) => {
    if (!texts.has(file)) texts.set(file, await readFile(path.join(REPO_ROOT, file), 'utf8'));
    return texts.get(file)!;
  };
  const broken: string[] = [];
  for (const file of DOCS) {
    for (const link of links(file, await read(file))) {
      const inRepository = repositoryPath(link.target);
      if (inRepository === undefined && /^[a-z][a-z0-9+.-]*:/i.test(link.target)) continue; // mailto: ...
      const [target = '', anchor] = (inRepository ?? link.target).split('#', 2);
      const resolved =
        inRepository !== undefined
          ? target
          : target === ''
            ? file
            : path.posix.normalize(path.posix.join(path.posix.dirname(file), target));
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
    const targets = links('README.md', readme).map(
      (link) => (repositoryPath(link.target) ?? link.target).split('#')[0],
    );
    expect(targets).toEqual(expect.arrayContaining(DOCS.slice(1)));
  });
});
