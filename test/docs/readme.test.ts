// The front page and the guides' generated reference: the newcomer commands CI runs, the handler example that must
// run as written, and the tables `npm run docs` writes from the code.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runTaskLocally } from '../../src/index.ts';
import type { TaskModule } from '../../src/index.ts';
import { GENERATED_DOCS } from '../../src/docs/reference.ts';
import { REPO_ROOT } from '../cli/run-cli.ts';

const read = (file: string) => readFile(path.join(REPO_ROOT, file), 'utf8');

describe('README.md', () => {
  it('shows the newcomer commands, and .ci/run runs the same test command', async () => {
    const readme = await read('README.md');
    const ci = await read('.ci/run');
    expect(readme).toContain('npm run demo -- --executions 9');
    expect(readme).toContain('\nnpm test\n');
    expect(ci.split('\n')).toContain('npm test');
  });

  it('stays a front page: under 8 KB, the details in the guides', async () => {
    // Counted as read: link targets (absolute URLs for files the package lacks) are not prose.
    const readme = (await read('README.md')).replace(/\]\([^)\s]+\)/g, ']()');
    expect(Buffer.byteLength(readme)).toBeLessThan(8 * 1024);
  });

  describe('its handler example', () => {
    let work: string | undefined;
    afterAll(async () => {
      if (work !== undefined) await rm(work, { recursive: true, force: true });
    });

    async function loadExample(): Promise<TaskModule> {
      const readme = await read('README.md');
      const code = /## A handler\n[\s\S]*?```ts\n([\s\S]*?)```/.exec(readme)?.[1];
      expect(code, 'a ```ts block under "## A handler"').toBeDefined();
      expect(code!.split('\n').length).toBeLessThanOrEqual(25);
      work = await mkdtemp(path.join(os.tmpdir(), 'df-worker-readme-'));
      const file = path.join(work, 'slugify-product.ts');
      const index = path.join(REPO_ROOT, 'src', 'index.ts');
      await writeFile(file, code!.replace(`from 'df-worker'`, `from ${JSON.stringify(index)}`));
      return ((await import(file)) as { default: TaskModule }).default;
    }

    it('runs as written: COMPLETED on good input, FAILED at once on bad input or a missing key', async () => {
      const task = await loadExample();
      expect(task.key).toBe('slugify-product');
      expect(await runTaskLocally(task, { sku: 'A-1', title: 'Desk lamp' })).toMatchObject({
        status: 'COMPLETED',
        output: { slug: 'desk-lamp-a-1' },
      });
      expect(await runTaskLocally(task, { sku: 1, title: 'Desk lamp' })).toMatchObject({
        status: 'FAILED',
        attempts: 1,
        output: { error: 'sku and title must be strings' },
      });
      expect(await runTaskLocally(task, { title: 'Desk lamp' })).toMatchObject({
        status: 'FAILED',
        attempts: 0,
        output: { missingInputKeys: ['sku'] },
      });
    });
  });
});

describe.each(GENERATED_DOCS.map((doc) => doc.path))('%s', (file) => {
  it('holds the tables generated from the code (run `npm run docs` to update)', async () => {
    const text = await read(file);
    const doc = GENERATED_DOCS.find((candidate) => candidate.path === file)!;
    expect(text).toBe(doc.render(text));
  });
});

describe('helm/README.md', () => {
  it('says what to do on every alert of the rules file, under a heading named for it', async () => {
    const rules = await read('helm/manifests/df-worker.rules.yaml');
    const guide = await read('helm/README.md');
    const alerts = [...rules.matchAll(/^\s*- alert: (\w+)$/gm)].map((match) => match[1]!);
    expect(alerts.length).toBeGreaterThan(10);
    const headings = new Set([...guide.matchAll(/^### (\w+)$/gm)].map((match) => match[1]!));
    expect(alerts.filter((alert) => !headings.has(alert))).toEqual([]);
  });
});
