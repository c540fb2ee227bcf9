// Loads the handler modules from the handlers directory once at start: one module per task key, each default-exporting
// a task. Every broken file is reported with its name so the operator can fix them all in one go.
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Logger } from 'pino';
import {
  defineTask,
  isTaskModule,
  TaskDefinitionError,
  type TaskModule,
  type TaskSpec,
} from './define-task.ts';
import { HandlerLoadError, HandlerLoadErrors, HandlersDirectoryError } from './load-errors.ts';
import { isPlainObject } from '../schema/plain-object.ts';
import { packageScope } from './module-scope.ts';
import { registerSelfResolution } from './self-resolve.ts';

/** A task module together with the file it came from. */
export type LoadedHandler = TaskModule & { file: string };

export interface LoadHandlersOptions {
  /** Receives one info line per loaded handler. Default: silent. */
  logger?: Logger;
}

export interface LoadHandlersResult {
  /** Loaded handlers by task key; a key defined in several files is left out (see `errors`). */
  handlers: Map<string, LoadedHandler>;
  errors: HandlerLoadError[];
}

const HANDLER_EXTENSIONS = ['.ts', '.mts', '.js', '.mjs'];
const DIR_SETTING = 'DF_HANDLERS_DIR';

/**
 * Imports every handler module at the top level of `dir`. Files named `*.test.*`, `*.spec.*`, `*.d.ts` or starting
 * with `_` or `.` are skipped, so tests and helpers can live next to the handlers.
 * Throws HandlersDirectoryError when `dir` is missing or holds no handler module; per-file failures are returned.
 */
export async function loadHandlers(
  dir: string,
  options: LoadHandlersOptions = {},
): Promise<LoadHandlersResult> {
  const files = await listHandlerFiles(dir);
  registerSelfResolution();

  const errors: HandlerLoadError[] = [];
  const byKey = new Map<string, LoadedHandler[]>();
  for (const file of files) {
    try {
      const handler = await loadHandlerFile(file);
      byKey.set(handler.key, [...(byKey.get(handler.key) ?? []), handler]);
    } catch (error) {
      if (!(error instanceof HandlerLoadError)) throw error;
      errors.push(error);
    }
  }

  const handlers = new Map<string, LoadedHandler>();
  for (const [key, loaded] of byKey) {
    const [first, ...others] = loaded;
    if (first === undefined) continue;
    if (others.length > 0) {
      const names = loaded.map((h) => `"${h.file}"`).join(' and ');
      errors.push(
        new HandlerLoadError(
          first.file,
          `task key "${key}" is defined in ${names}; keep exactly one handler module per task key`,
        ),
      );
      continue;
    }
    handlers.set(key, first);
    options.logger?.info({ taskKey: key, file: first.file }, 'loaded handler');
  }
  return { handlers, errors };
}

/** Like `loadHandlers`, but any broken file fails the whole load with a HandlerLoadErrors listing each one. */
export async function loadHandlersOrThrow(
  dir: string,
  options: LoadHandlersOptions = {},
): Promise<Map<string, LoadedHandler>> {
  const { handlers, errors } = await loadHandlers(dir, options);
  if (errors.length > 0) throw new HandlerLoadErrors(dir, errors);
  return handlers;
}

async function listHandlerFiles(dir: string): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const problem =
      code === 'ENOENT'
        ? 'does not exist'
        : code === 'ENOTDIR'
          ? 'is not a directory'
          : `cannot be read (${code ?? String(error)})`;
    throw new HandlersDirectoryError(
      dir,
      `handlers directory "${dir}" ${problem}; create it with one handler module per task key, ` +
        `or set ${DIR_SETTING} to the directory that holds them`,
      { cause: error },
    );
  }

  const files: string[] = [];
  for (const name of names.filter(isHandlerFileName).sort()) {
    const file = path.join(dir, name);
    // Follows symlinks, so a handler linked in from elsewhere still counts; a directory named like a module does
    // not. An unreadable entry is kept so that its import fails and gets reported with the file's name.
    const stats = await stat(file).catch(() => undefined);
    if (stats === undefined || stats.isFile()) files.push(file);
  }
  if (files.length === 0) {
    throw new HandlersDirectoryError(
      dir,
      `no handler modules in "${dir}" (looked for ${HANDLER_EXTENSIONS.join(', ')} files at its top level, ` +
        `skipping *.test.*, *.spec.*, *.d.ts and names starting with _ or .); add one, or set ${DIR_SETTING} to ` +
        `the directory that holds them`,
    );
  }
  return files;
}

function isHandlerFileName(name: string): boolean {
  if (name.startsWith('_') || name.startsWith('.')) return false;
  if (!HANDLER_EXTENSIONS.includes(path.extname(name))) return false;
  return !/\.(test|spec)\./.test(name) && !/\.d\.m?ts$/.test(name);
}

async function loadHandlerFile(file: string): Promise<LoadedHandler> {
  let namespace: { default?: unknown };
  try {
    namespace = (await import(pathToFileURL(path.resolve(file)).href)) as { default?: unknown };
  } catch (error) {
    const message = (await describeCommonJsScope(file, error)) ?? describeImportFailure(error);
    throw new HandlerLoadError(file, message, { cause: error });
  }

  const exported = namespace.default;
  if (exported === undefined) {
    throw new HandlerLoadError(
      file,
      'has no default export; end the module with `export default defineTask({ key: ..., handle(input, ctx) {...} })` ' +
        `(a helper module that is not a handler: name it _${path.basename(file)} or move it into a subfolder)`,
    );
  }
  let task: TaskModule;
  if (isTaskModule(exported)) {
    task = exported;
  } else if (isPlainObject(exported)) {
    // A plain object is accepted when it is a valid spec, so handlers need not import df-worker at all.
    try {
      task = defineTask(exported as unknown as TaskSpec);
    } catch (error) {
      if (!(error instanceof TaskDefinitionError)) throw error;
      throw new HandlerLoadError(file, `default export is not a valid task: ${error.message}`, {
        cause: error,
      });
    }
  } else {
    throw new HandlerLoadError(
      file,
      `default export is ${describeExport(exported)}, not a task; export default defineTask({ key: ..., handle(input, ctx) {...} })`,
    );
  }
  return { ...task, file };
}

/**
 * The fix for an ES module that Node read as CommonJS: a `.ts`/`.js` handler using `import` or `export` under a
 * package.json that does not say `"type": "module"` (`npm init` writes `"commonjs"`). Undefined for any other
 * failure.
 */
async function describeCommonJsScope(file: string, error: unknown): Promise<string | undefined> {
  if (!(error instanceof SyntaxError)) return undefined;
  if (!/Cannot use import statement outside a module|Unexpected token 'export'/.test(error.message)) {
    return undefined;
  }
  const extension = path.extname(file);
  if (extension !== '.ts' && extension !== '.js') return undefined;
  const { scope, packageJson } = await packageScope(path.dirname(file));
  if (scope === 'module') return undefined;
  const renamed = `${path.basename(file, extension)}${extension === '.ts' ? '.mts' : '.mjs'}`;
  const where =
    packageJson === undefined
      ? `no package.json above it says "type": "module"`
      : `${packageJson} does not say "type": "module"`;
  const addType =
    packageJson === undefined
      ? `create a package.json with "type": "module" in ${path.dirname(path.resolve(file))} or a folder above`
      : `add "type": "module" to ${packageJson}`;
  return (
    `is an ES module (it uses import/export), but Node loads it as CommonJS because ${where}; ` +
    `rename it to ${renamed}, or ${addType} (${error.message})`
  );
}

function describeImportFailure(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : String(error);
  if (code === 'ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX') {
    return `use erasable TypeScript syntax only (no enum, namespace, parameter properties); Node strips types without compiling them (${message})`;
  }
  if (code === 'ERR_UNKNOWN_FILE_EXTENSION') {
    return `this Node cannot load the file type; TypeScript handlers need Node >= 22.18 with type stripping (${message})`;
  }
  if (error instanceof SyntaxError) return `syntax error: ${message}${syntaxErrorLine(error)}`;
  if (code === 'ERR_MODULE_NOT_FOUND') return `an import cannot be resolved: ${message}`;
  return `failed while importing: ${message}`;
}

/** Node puts "file:line" atop a TypeScript syntax error's stack; plain JS syntax errors carry no position. */
function syntaxErrorLine(error: SyntaxError): string {
  const line = /^\S+:(\d+)\n/.exec(error.stack ?? '')?.[1];
  return line === undefined ? '' : ` (line ${line})`;
}

function describeExport(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'object') return `an instance of ${value.constructor?.name ?? 'an unknown class'}`;
  return `a ${typeof value}`;
}
