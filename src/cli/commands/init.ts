// `df-worker init [dir]`: scaffolds a new project (package.json depending on this df-worker, a handler and its
// test, tsconfig, Dockerfile), so that `npm i && npm run dev` in it is the whole start.
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describeError, type ErrorCode } from '../../errors/catalogue.ts';
import { EXIT_FAILURE, EXIT_OK } from '../../errors/exit-codes.ts';
import { parseCommandArgs, usageError, wantsHelp, type Command } from '../command.ts';
import { cliCommand, PACKAGE_ROOT, shellQuote } from '../invocation.ts';
import { installedPackageSpec, type PackageSpec } from '../package-spec.ts';
import { handlerSource, handlerTestSource, SAMPLE_INPUT } from '../templates/handler.ts';
import {
  dockerfileSource,
  dockerignoreSource,
  gitignoreSource,
  packageJsonSource,
  readmeSource,
  tsconfigSource,
  type ProjectTemplate,
} from '../templates/project.ts';

/** The task key of the starter handler. */
export const STARTER_TASK_KEY = 'my-task';

/** The folder holds files already; nothing was written. */
export class ProjectFolderNotEmptyError extends Error {
  readonly code: ErrorCode = 'DFW_CLI_INIT_NOT_EMPTY';
  readonly dir: string;
  /** Files init would write that exist already (relative to `dir`); empty when only other files are there. */
  readonly overwritten: string[];

  constructor(dir: string, overwritten: string[], others: number) {
    const would =
      overwritten.length > 0
        ? `it would overwrite ${overwritten.join(', ')}`
        : `it holds ${others} ${others === 1 ? 'entry' : 'entries'} already`;
    super(
      `${dir} is not empty (${would}); nothing was written. Give a new folder, e.g. ` +
        `\`${cliCommand('init my-worker')}\`, or add --force to write the project files over what is there`,
    );
    this.name = 'ProjectFolderNotEmptyError';
    this.dir = dir;
    this.overwritten = overwritten;
  }
}

/** The files of a new project by path relative to its folder, in the order they are listed. */
export function projectFiles(template: ProjectTemplate): Map<string, string> {
  const key = template.taskKey;
  return new Map([
    ['package.json', packageJsonSource(template)],
    ['tsconfig.json', tsconfigSource()],
    [path.join('handlers', `${key}.ts`), handlerSource(key, 'ts')],
    [path.join('handlers', `${key}.test.ts`), handlerTestSource(key, 'ts', 'module')],
    ['Dockerfile', dockerfileSource(template)],
    ['.dockerignore', dockerignoreSource()],
    ['.gitignore', gitignoreSource()],
    ['README.md', readmeSource(template)],
  ]);
}

/**
 * Writes the project into `dir` (created when missing). Refuses a folder with anything in it but `.git` (a
 * `git init` first is fine) unless `force`, naming the files it would overwrite.
 */
export async function scaffoldProject(
  dir: string,
  template: ProjectTemplate,
  force = false,
): Promise<string[]> {
  const files = projectFiles(template);
  const present = await readdir(dir).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [];
    throw error;
  });
  const others = present.filter((name) => name !== '.git');
  if (others.length > 0 && !force) {
    const overwritten = [...files.keys()].filter((file) => existsSync(path.join(dir, file)));
    throw new ProjectFolderNotEmptyError(dir, overwritten, others.length);
  }
  for (const [file, text] of files) {
    await mkdir(path.dirname(path.join(dir, file)), { recursive: true });
    await writeFile(path.join(dir, file), text);
  }
  return [...files.keys()];
}

/** A valid npm package name from a folder's name: lower case, other characters as `-`. */
export function projectName(dir: string): string {
  const name = path
    .basename(path.resolve(dir))
    .toLowerCase()
    .replace(/[^a-z0-9._~-]+/g, '-')
    .replace(/^[._-]+|-+$/g, '');
  return name === '' ? 'df-worker-project' : name.slice(0, 214);
}

interface OwnManifest {
  version: string;
  engines?: { node?: string };
  devDependencies?: Record<string, string>;
}

function ownManifest(): OwnManifest {
  return JSON.parse(readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8')) as OwnManifest;
}

/** The template's fields that come from this df-worker's own package.json and how it was installed. */
function templateFor(dir: string, own: OwnManifest, packageSpec: PackageSpec): ProjectTemplate {
  return {
    name: projectName(dir),
    taskKey: STARTER_TASK_KEY,
    packageSpec: packageSpec.spec,
    version: own.version,
    nodeRange: own.engines?.node ?? '>=22.19',
    // The versions this package is tested with; fallbacks for a manifest without them.
    devDependencies: {
      '@types/node': own.devDependencies?.['@types/node'] ?? '^24.0.0',
      vitest: own.devDependencies?.vitest ?? '^5.0.0',
    },
  };
}

export const initCommand: Command = {
  name: 'init',
  summary: 'scaffold a new project: package.json, a handler and its test, tsconfig, Dockerfile',
  help: `
Usage: df-worker init [DIR] [--package-spec SPEC] [--force]

Writes a new project into DIR (default: the current folder; created when missing): package.json ("type":
"module", a dependency on df-worker, the scripts dev, test, check and start), tsconfig.json for erasable
TypeScript run by Node, handlers/${STARTER_TASK_KEY}.ts with its vitest file, a Dockerfile building FROM the
df-worker image, .gitignore, .dockerignore and a README. A folder holding anything but .git is refused.

The df-worker dependency is the spec this df-worker was installed from: run as \`npx ./df-worker-0.1.0.tgz init\`
it is file:<absolute path of the tarball>; from a git spec, that spec; from the registry, ^<version>.

Options:
  --package-spec SPEC  the dependency spec of df-worker in package.json instead (a version range, a
                       file: tarball path, github:owner/repo...)
  --force              write into a folder that is not empty, overwriting the files of the same names
  -h, --help           this help
`,
  async run(argv) {
    if (wantsHelp(argv, this)) return EXIT_OK;
    const parsed = parseCommandArgs('init', {
      args: argv,
      options: {
        'package-spec': { type: 'string' },
        force: { type: 'boolean', default: false },
      },
      allowPositionals: true,
    });
    if (typeof parsed === 'number') return parsed;
    const [dirArgument = '.', ...extra] = parsed.positionals;
    if (extra.length > 0) return usageError('init', `unexpected arguments: ${extra.join(' ')}`);
    const option = parsed.values['package-spec'];
    if (option !== undefined && option.trim() === '') {
      return usageError('init', '--package-spec is empty; give a spec such as ^0.1.0 or file:/path/to.tgz');
    }
    const dir = path.resolve(dirArgument);
    const own = ownManifest();
    const packageSpec: PackageSpec =
      option === undefined
        ? installedPackageSpec(PACKAGE_ROOT, own.version)
        : { spec: option, from: 'installed' };
    const template = templateFor(dir, own, packageSpec);
    let written: string[];
    try {
      written = await scaffoldProject(dir, template, parsed.values.force);
    } catch (error) {
      if (!(error instanceof ProjectFolderNotEmptyError)) throw error;
      process.stderr.write(`df-worker init: ${describeError(error)}\n`);
      return EXIT_FAILURE;
    }
    process.stdout.write(nextSteps(dir, written, template, packageSpec));
    return EXIT_OK;
  },
};

function nextSteps(dir: string, written: string[], t: ProjectTemplate, spec: PackageSpec): string {
  const relative = path.relative(process.cwd(), dir);
  const shown = relative === '' ? '.' : relative.startsWith('..') ? dir : relative;
  const cd = shown === '.' ? '' : `cd ${shellQuote(shown)} && `;
  const input = shellQuote(JSON.stringify(SAMPLE_INPUT));
  const specNote =
    spec.from === 'version'
      ? [
          `note: package.json depends on "df-worker": "${t.packageSpec}", from the registry, where df-worker is not ` +
            'published yet: if `npm i` cannot find it, set the dependency to the tarball or git spec you installed ' +
            'it from (or run init again with --package-spec SPEC).',
        ]
      : spec.from === 'clone'
        ? [
            `note: package.json depends on "df-worker": "${t.packageSpec}", this clone, which \`npm i\` links: ` +
              'run `npm run build` in the clone first.',
          ]
        : [];
  return [
    ...written.map((file) => `created ${path.join(shown, file)}`),
    `df-worker dependency: ${t.packageSpec}`,
    ...specNote,
    '',
    'Next:',
    `  ${cd}npm i && npm run dev`,
    `  then, from another terminal in it: npx df-worker dev --enqueue ${t.taskKey} ${input}`,
    `  npm test, npm run check, and \`npx df-worker new <task-key>\` for another handler`,
    '',
  ].join('\n');
}
