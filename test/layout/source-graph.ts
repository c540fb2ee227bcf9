// src/'s files and their imports, read from the source's own import lines (type imports included), for the
// layout tests.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { REPO_ROOT } from '../cli/process.ts';

export const SRC = join(REPO_ROOT, 'src');

export function sourceFiles(dir: string = SRC): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

const IMPORT_LINE =
  /(?:^|\n)\s*(?:(?:import|export)\s[^'"]*?from\s+|import\s+)'(\.[^']+)'|import\('(\.[^']+)'\)/g;

/** Each import of `file` that names a file of src/: its path and the specifier as written. */
export function importsOf(file: string): { target: string; specifier: string; typeOnly: boolean }[] {
  const found: { target: string; specifier: string; typeOnly: boolean }[] = [];
  for (const match of readFileSync(file, 'utf8').matchAll(IMPORT_LINE)) {
    const specifier = match[1] ?? match[2]!;
    const target = resolve(dirname(file), specifier);
    // Not a file: an import line inside a template string (code a command writes for the user).
    if (!target.startsWith(SRC) || !existsSync(target)) continue;
    found.push({ target, specifier, typeOnly: /^\s*(?:import|export)\s+type\s/.test(match[0].trimStart()) });
  }
  return found;
}

/** file (relative to src/) -> the files of src/ it imports, each with the import that shows it. */
export function fileImports(): Map<string, Map<string, string>> {
  const graph = new Map<string, Map<string, string>>();
  for (const file of sourceFiles()) {
    const edges = new Map<string, string>();
    graph.set(relative(SRC, file), edges);
    for (const { target, specifier } of importsOf(file))
      edges.set(relative(SRC, target), `imports ${specifier}`);
  }
  return graph;
}
