// `df-worker new <task-key>`: scaffolds a handler module and its test in the handlers folder, so a new task
// starts from code that already loads, runs and passes its test.
import { existsSync } from 'node:fs';
import { mkdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError } from '../../config/errors.ts';
import { loadConfig } from '../../config/load.ts';
import { describeError } from '../../errors/catalogue.ts';
import { wantsHelp, type Command, usageError, parseCommandArgs } from '../command.ts';
import { cliCommand, shellQuote } from '../invocation.ts';
import {
  handlerExtension,
  handlerSource,
  handlerTestSource,
  SAMPLE_INPUT,
  type HandlerLanguage,
} from '../templates/handler.ts';
import { packageScope, type PackageScope } from '../../handlers/module-scope.ts';
import { EXIT_CONFIG, EXIT_FAILURE, EXIT_OK } from '../../errors/exit-codes.ts';
import type { ErrorCode } from '../../errors/catalogue.ts';

/** Every extension the loader picks up: a handler under another one would make the key defined twice. */
const HANDLER_EXTENSIONS = ['.ts', '.mts', '.js', '.mjs'];

/** The files a scaffold writes, by absolute path, and how Node reads them. */
export interface Scaffold {
  handlerFile: string;
  testFile: string;
  /**
   * The module scope of the handlers folder and the package.json that sets it, if any. A package.json without
   * `"type": "module"` (or none at all) scaffolds `.mts`: an ES module whatever the project says, so nothing in
   * the user's package.json is changed.
   */
  scope: PackageScope;
}

/**
 * Why `key` cannot name a new handler file, or undefined when it can. The loader skips names starting with `.`
 * or `_` and names like `x.test.ts` or `x.d.ts`, so those keys would scaffold a handler that never loads.
 */
export function taskKeyProblem(key: string): string | undefined {
  if (key === '') return 'the task key is empty; give the key the service knows the task by';
  if (!/^[A-Za-z0-9._-]+$/.test(key)) {
    return `task key "${key}" may only hold letters, digits, ".", "_" and "-", since it becomes a file name`;
  }
  if (key.startsWith('.') || key.startsWith('_')) {
    return `task key "${key}" starts with "${key[0]}"; the loader skips such files, so start it with a letter or digit`;
  }
  if (/\.(test|spec|d)$/.test(key) || /\.(test|spec)\./.test(key)) {
    return `task key "${key}" would make a file the loader skips (*.test.*, *.spec.*, *.d.ts); choose another key`;
  }
  return undefined;
}

/** Writes the handler and its test into `dir` (created when missing); refuses to overwrite anything. */
export async function scaffoldHandler(
  dir: string,
  key: string,
  language: HandlerLanguage,
): Promise<Scaffold> {
  const scope = await packageScope(dir);
  const extension = handlerExtension(language, scope.scope);
  const handlerFile = path.join(dir, `${key}${extension}`);
  const testFile = path.join(dir, `${key}.test${extension}`);
  const taken: string[] = [];
  for (const file of [...HANDLER_EXTENSIONS.map((ext) => path.join(dir, `${key}${ext}`)), testFile]) {
    if (await exists(file)) taken.push(file);
  }
  if (taken.length > 0) throw new ScaffoldExistsError(taken);
  await mkdir(dir, { recursive: true });
  // 'wx' fails rather than overwrite a file created since the check above.
  await writeFile(handlerFile, handlerSource(key, language), { flag: 'wx' });
  await writeFile(testFile, handlerTestSource(key, language, scope.scope), { flag: 'wx' });
  return { handlerFile, testFile, scope };
}

/** A file `new` would write, or another handler for the same key, already exists. */
export class ScaffoldExistsError extends Error {
  readonly code: ErrorCode = 'DFW_CLI_SCAFFOLD_EXISTS';
  readonly files: string[];

  constructor(files: string[]) {
    super(
      `${files.join(', ')} already ${files.length === 1 ? 'exists' : 'exist'}; nothing was written. ` +
        'Edit the existing handler, or remove it first to start over',
    );
    this.name = 'ScaffoldExistsError';
    this.files = files;
  }
}

async function exists(file: string): Promise<boolean> {
  try {
    await stat(file);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw error;
  }
}

export const newCommand: Command = {
  name: 'new',
  summary: 'scaffold a handler module and its test for a task key',
  help: `
Usage: df-worker new <task-key> [--dir DIR] [--js]

Writes DIR/<task-key>.ts, a typed handler (erasable TypeScript: it runs on Node without a build), and
DIR/<task-key>.test.ts, a vitest file that runs it through runTaskLocally. Existing files are never overwritten.
The key may hold letters, digits, ".", "_" and "-": it is the service's task key and the file name.

When the nearest package.json does not say "type": "module" (npm init writes "commonjs"), the files are
<task-key>.mts and <task-key>.test.mts instead: always ES modules, so package.json is left as it is.

Options:
  --dir DIR   handlers folder (default: DF_HANDLERS_DIR, else ./handlers); created when missing
  --js        write <task-key>.mjs and <task-key>.test.mjs (plain JavaScript) instead
  -h, --help  this help
`,
  async run(argv) {
    if (wantsHelp(argv, this)) return EXIT_OK;
    const parsed = parseCommandArgs('new', {
      args: argv,
      options: { dir: { type: 'string' }, js: { type: 'boolean', default: false } },
      allowPositionals: true,
    });
    if (typeof parsed === 'number') return parsed;
    const [key, ...extra] = parsed.positionals;
    if (key === undefined)
      return usageError('new', `give the task key, e.g. \`${cliCommand('new enrich-product')}\``);
    if (extra.length > 0) return usageError('new', `unexpected arguments: ${extra.join(' ')}`);
    const problem = taskKeyProblem(key);
    if (problem !== undefined) return usageError('new', problem);

    let dir = parsed.values.dir;
    if (dir === undefined) {
      // The folder is the only setting `new` needs, so the configuration is read only when it must be.
      try {
        dir = loadConfig({ require: 'none' }).handlers.dir;
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error;
        process.stderr.write(`df-worker new: ${describeError(error)}\n`);
        return EXIT_CONFIG;
      }
    }
    const language: HandlerLanguage = parsed.values.js ? 'js' : 'ts';
    let scaffold: Scaffold;
    try {
      scaffold = await scaffoldHandler(path.resolve(dir), key, language);
    } catch (error) {
      if (!(error instanceof ScaffoldExistsError)) throw error;
      process.stderr.write(`df-worker new: ${describeError(error)}\n`);
      return EXIT_FAILURE;
    }
    process.stdout.write(nextSteps(key, scaffold, parsed.values.dir));
    return EXIT_OK;
  },
};

function nextSteps(key: string, scaffold: Scaffold, dirOption: string | undefined): string {
  // Relative when under the working directory (shorter to read and paste), absolute otherwise.
  const shown = (file: string) => {
    const relative = path.relative(process.cwd(), file);
    return relative.startsWith('..') || path.isAbsolute(relative) ? file : relative;
  };
  const dirArgument = dirOption === undefined ? '' : ` --dir ${shellQuote(dirOption)}`;
  const input = shellQuote(JSON.stringify(SAMPLE_INPUT));
  const { scope, packageJson } = scaffold.scope;
  const typeNote =
    scope === 'module' || scaffold.handlerFile.endsWith('.mjs')
      ? []
      : [
          `note: ${packageJson === undefined ? 'no package.json' : shown(packageJson)} does not set "type": "module", ` +
            'so the files are .mts (always ES modules; package.json was not changed). ' +
            'With "type": "module" there, `new` writes .ts files.',
        ];
  return [
    `created ${shown(scaffold.handlerFile)}`,
    `created ${shown(scaffold.testFile)}`,
    ...typeNote,
    '',
    'Next:',
    `  1. edit ${shown(scaffold.handlerFile)}: description, inputKeys, outputKeys and handle()`,
    `  2. ${cliCommand(`run ${key} --input ${input}${dirArgument}`)}`,
    `  3. npx vitest run ${shown(scaffold.testFile)}${vitestNote()}`,
    `  4. ${cliCommand(`check${dirArgument}`)}`,
    `  5. ${cliCommand(`tasks sync --dry-run${dirArgument}`)}, then without --dry-run to create the task on the service`,
    '',
  ].join('\n');
}

/** The install step vitest needs first when no node_modules above the working directory holds it. */
function vitestNote(): string {
  for (let folder = process.cwd(); ; folder = path.dirname(folder)) {
    if (existsSync(path.join(folder, 'node_modules', 'vitest', 'package.json'))) return '';
    if (path.dirname(folder) === folder) return ' (after `npm i -D vitest`)';
  }
}
