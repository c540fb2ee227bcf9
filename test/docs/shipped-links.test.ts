// The docs inside the npm package link only to files the package holds: a relative link to anything else (the
// Helm guide, CONTRIBUTING.md, the benchmarks' charts) is dead in node_modules and on the registry's page, so those
// point at the repository on GitHub instead. The file list is npm's own, from `npm pack --dry-run`.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../cli/run-cli.ts';
import { anchors, links, REPOSITORY_URL } from './markdown.ts';

let packed: Set<string>;

beforeAll(async () => {
  // --ignore-scripts: no build; dist/ holds no Markdown, so the list of docs is the same with or without it.
  const { stdout } = await promisify(execFile)('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
    cwd: REPO_ROOT,
    timeout: 60_000,
    env: { ...process.env, PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH}` },
  });
  const [result] = JSON.parse(stdout) as [{ files: { path: string }[] }];
  packed = new Set(result.files.map((file) => file.path));
}, 60_000);

describe('docs shipped in the package', () => {
  it('include the front page and the guides the package describes', () => {
    expect([...packed].filter((file) => file.endsWith('.md')).sort()).toEqual(
      expect.arrayContaining(['README.md', 'config/README.md', 'handlers/README.md']),
    );
  });

  it('link relatively only to files that ship, with anchors that exist', async () => {
    const broken: string[] = [];
    for (const file of [...packed].filter((name) => name.endsWith('.md'))) {
      const markdown = await readFile(path.join(REPO_ROOT, file), 'utf8');
      for (const link of links(file, markdown)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(link.target)) continue;
        const [target = '', anchor] = link.target.split('#', 2);
        const resolved =
          target === '' ? file : path.posix.normalize(path.posix.join(path.posix.dirname(file), target));
        const where = `${file}:${link.line}: ${link.target}`;
        if (!packed.has(resolved)) {
          broken.push(
            `${where} (${resolved} is not in the package: link ${REPOSITORY_URL}/blob/main/${resolved})`,
          );
        } else if (anchor !== undefined && resolved.endsWith('.md')) {
          const text = await readFile(path.join(REPO_ROOT, resolved), 'utf8');
          if (!anchors(text).has(anchor)) broken.push(`${where} (no heading #${anchor} in ${resolved})`);
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it('name the repository the absolute links point at in package.json', async () => {
    const manifest = JSON.parse(await readFile(path.join(REPO_ROOT, 'package.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    expect(manifest).toMatchObject({
      repository: { type: 'git', url: `git+${REPOSITORY_URL}.git` },
      homepage: `${REPOSITORY_URL}#readme`,
      bugs: { url: `${REPOSITORY_URL}/issues` },
    });
  });
});
