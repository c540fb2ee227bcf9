// Checks the Dockerfile and .dockerignore as text, since no Docker engine runs in CI: the image's base, stages,
// user, state volume, init, probe and entry point, and that the build context keeps what the build copies.
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { schema } from '../../src/config/schema.ts';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

interface Instruction {
  keyword: string;
  args: string;
  line: number;
}

interface Stage {
  from: string;
  name: string | undefined;
  instructions: Instruction[];
}

/** Splits a Dockerfile into stages of instructions: comments dropped, `\` continuations joined. */
function parseDockerfile(text: string): Stage[] {
  const instructions: Instruction[] = [];
  let pending: { text: string; line: number } | undefined;
  text.split('\n').forEach((raw, index) => {
    const line = raw.trim();
    if (line.startsWith('#') || (line === '' && pending === undefined)) return;
    const continued = line.endsWith('\\');
    const body = continued ? line.slice(0, -1).trim() : line;
    pending =
      pending === undefined
        ? { text: body, line: index + 1 }
        : { ...pending, text: `${pending.text} ${body}` };
    if (continued) return;
    const [keyword = '', ...rest] = pending.text.split(/\s+/);
    instructions.push({ keyword: keyword.toUpperCase(), args: rest.join(' '), line: pending.line });
    pending = undefined;
  });

  const stages: Stage[] = [];
  for (const instruction of instructions) {
    if (instruction.keyword === 'FROM') {
      const match = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(instruction.args);
      stages.push({ from: match?.[1] ?? instruction.args, name: match?.[2], instructions: [] });
    } else {
      const stage = stages.at(-1);
      if (stage === undefined) continue; // ARG before the first FROM
      stage.instructions.push(instruction);
    }
  }
  return stages;
}

function all(stage: Stage, keyword: string): Instruction[] {
  return stage.instructions.filter((instruction) => instruction.keyword === keyword);
}

function execForm(instruction: Instruction | undefined): string[] {
  expect(instruction, 'instruction present').toBeDefined();
  const parsed: unknown = JSON.parse(instruction!.args);
  expect(Array.isArray(parsed), `${instruction!.keyword} in exec (JSON array) form`).toBe(true);
  return parsed as string[];
}

/** ENV instructions of a stage as a map (`ENV A=1 B=2` form). */
function environment(stage: Stage): Map<string, string> {
  const env = new Map<string, string>();
  for (const { args } of all(stage, 'ENV')) {
    for (const match of args.matchAll(/(\w+)=("[^"]*"|\S+)/g))
      env.set(match[1]!, match[2]!.replace(/^"|"$/g, ''));
  }
  return env;
}

/** Whether a .dockerignore pattern list excludes `path` (a file or folder relative to the context root). */
function isIgnored(patterns: string[], path: string): boolean {
  let ignored = false;
  for (const pattern of patterns) {
    const negated = pattern.startsWith('!');
    const body = (negated ? pattern.slice(1) : pattern).replace(/^\/+|\/+$/g, '');
    const source = body
      .split('/')
      .map((part) =>
        part === '**' ? '.*' : part.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*'),
      )
      .join('/')
      .replace(/\.\*\//g, '(?:.*/)?');
    // A pattern matching a folder excludes everything below it.
    if (new RegExp(`^${source}(?:/.*)?$`).test(path)) ignored = !negated;
  }
  return ignored;
}

const dockerfile = await readFile(`${repoRoot}Dockerfile`, 'utf8');
const stages = parseDockerfile(dockerfile);
const runtime = stages.at(-1)!;
const build = stages[0]!;
const packageJson = JSON.parse(await readFile(`${repoRoot}package.json`, 'utf8')) as {
  version: string;
  license: string;
  bin: Record<string, string>;
};

describe('Dockerfile', () => {
  it('builds every stage on an official Node 24 image with the major version pinned', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    for (const stage of stages) expect(stage.from).toMatch(/^node:24(-[a-z0-9.-]+)?(@sha256:[a-f0-9]{64})?$/);
  });

  it('installs every dependency and builds dist/ in the build stage', () => {
    const runs = all(build, 'RUN').map((run) => run.args);
    expect(runs.some((run) => /\bnpm ci\b/.test(run) && !run.includes('--omit=dev'))).toBe(true);
    expect(runs.some((run) => run.includes('npm run build'))).toBe(true);
  });

  it('installs only production dependencies, without install scripts, in the runtime stage', () => {
    const installs = all(runtime, 'RUN').filter((run) => /\bnpm (ci|install)\b/.test(run.args));
    expect(installs.length).toBe(1);
    expect(installs[0]!.args).toContain('npm ci');
    expect(installs[0]!.args).toContain('--omit=dev');
    expect(installs[0]!.args).toContain('--ignore-scripts');
  });

  it('copies dist/ from the build stage, and config/, handlers/ and package files into /app', () => {
    const copies = all(runtime, 'COPY').map((copy) => copy.args);
    expect(copies).toContainEqual(
      expect.stringMatching(new RegExp(`^--from=${build.name ?? '0'} /app/dist `)),
    );
    for (const source of ['config', 'handlers', 'package.json package-lock.json']) {
      expect(copies.some((copy) => copy.startsWith(`${source} `))).toBe(true);
    }
    expect(all(runtime, 'WORKDIR').at(-1)?.args).toBe('/app');
  });

  it('runs as a non-root user given by number', () => {
    const user = all(runtime, 'USER').at(-1)?.args;
    expect(user).toBeDefined();
    const [uid] = user!.split(':');
    expect(uid).toMatch(/^\d+$/);
    expect(Number(uid)).toBeGreaterThan(0);
  });

  it('keeps the state in a volume at /var/lib/df-worker that DF_STATE_DIR names and the user owns', () => {
    const volume = all(runtime, 'VOLUME').map((v) => v.args);
    expect(volume).toContainEqual(expect.stringContaining('/var/lib/df-worker'));
    const env = environment(runtime);
    expect(env.get('DF_STATE_DIR')).toBe('/var/lib/df-worker');
    expect(env.get('DF_HANDLERS_DIR')).toBe('/app/handlers');
    const uid = all(runtime, 'USER').at(-1)!.args;
    expect(all(runtime, 'RUN').some((run) => run.args.includes(`chown ${uid} /var/lib/df-worker`))).toBe(
      true,
    );
  });

  it('starts the package bin under tini, with `start` as the overridable command', () => {
    expect(all(runtime, 'RUN').some((run) => /apt-get install\b.*\btini\b/.test(run.args))).toBe(true);
    const entrypoint = execForm(all(runtime, 'ENTRYPOINT').at(-1));
    expect(entrypoint.slice(0, 2)).toEqual(['/usr/bin/tini', '--']);
    expect(entrypoint.slice(2)).toEqual(['node', packageJson.bin['df-worker']!.replace(/^\.\//, '')]);
    expect(execForm(all(runtime, 'CMD').at(-1))).toEqual(['start']);
  });

  it('exposes the default HTTP port and probes /healthz with node, not curl', () => {
    const port = String(schema.http.port.default);
    expect(all(runtime, 'EXPOSE').map((e) => e.args)).toContain(port);
    const healthcheck = all(runtime, 'HEALTHCHECK').at(-1);
    expect(healthcheck).toBeDefined();
    const command = /\bCMD\s+(\[.*\])$/.exec(healthcheck!.args)?.[1];
    const argv = JSON.parse(command ?? 'null') as string[];
    expect(argv[0]).toBe('node');
    expect(argv.join(' ')).toContain('/healthz');
    expect(argv.join(' ')).toContain(`process.env.DF_HTTP_PORT||${port}`);
    expect(healthcheck!.args).not.toMatch(/curl|wget/);
  });

  it('labels the image with OCI labels whose version and licence match package.json', () => {
    const labels = all(runtime, 'LABEL')
      .map((l) => l.args)
      .join(' ');
    expect(labels).toContain('org.opencontainers.image.title="df-worker"');
    expect(labels).toContain(`org.opencontainers.image.licenses="${packageJson.license}"`);
    expect(labels).toContain('org.opencontainers.image.version="${VERSION}"');
    expect(all(runtime, 'ARG').map((a) => a.args)).toContain(`VERSION=${packageJson.version}`);
  });

  it('points the entry point at the file `npm run build` emits for the bin', async () => {
    // Read as tsc reads it: a tsconfig may hold comments.
    const text = await readFile(`${repoRoot}tsconfig.build.json`, 'utf8');
    const buildConfig = ts.parseConfigFileTextToJson('tsconfig.build.json', text).config as {
      compilerOptions: { outDir: string; rootDir: string };
    };
    expect(buildConfig.compilerOptions).toMatchObject({ outDir: 'dist', rootDir: 'src' });
    expect(packageJson.bin['df-worker']).toBe('./dist/cli/main.js');
  });
});

describe('.dockerignore', () => {
  const patternsPromise = readFile(`${repoRoot}.dockerignore`, 'utf8').then((text) =>
    text
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '' && !line.startsWith('#')),
  );

  it('keeps node_modules, build output, tests, benchmarks, state, coverage, git and the chart out of the context', async () => {
    const patterns = await patternsPromise;
    for (const path of ['node_modules', 'node_modules/pino/package.json', 'dist', '.git', 'test', 'bench']) {
      expect(isIgnored(patterns, path), path).toBe(true);
    }
    for (const path of ['.state', 'coverage', 'helm/df-worker/values.yaml']) {
      expect(isIgnored(patterns, path), path).toBe(true);
    }
  });

  it('leaves handler tests and the handler guide out of the image but keeps the handlers', async () => {
    const patterns = await patternsPromise;
    expect(isIgnored(patterns, 'handlers/enrich-product.test.ts')).toBe(true);
    expect(isIgnored(patterns, 'handlers/enrich-product.ts')).toBe(false);
    expect(isIgnored(patterns, 'handlers/README.md')).toBe(true);
    expect(isIgnored(patterns, 'handlers/console-executions.png')).toBe(true);
  });

  it('keeps every path the Dockerfile copies from the context', async () => {
    const patterns = await patternsPromise;
    const sources = stages
      .flatMap((stage) => all(stage, 'COPY'))
      .filter((copy) => !copy.args.startsWith('--from='))
      .flatMap((copy) => copy.args.split(/\s+/).slice(0, -1));
    expect(sources).toEqual(expect.arrayContaining(['src', 'config', 'handlers', 'package.json']));
    for (const source of sources) expect(isIgnored(patterns, source), source).toBe(false);
  });
});
