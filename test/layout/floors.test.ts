// The house's floors (issue 37): src/'s folders import one another without a loop, so each stands above
// everything it imports and no import runs from a lower folder up to a higher one. Read from the source's own
// import lines, type imports included: a loop of types is a loop a newcomer must read around too.
import { relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../cli/process.ts';
import { fileImports, importsOf, sourceFiles, SRC } from './source-graph.ts';

/** The top folder of src/ a file lives in ('' for src/index.ts). */
function folderOf(path: string): string {
  const [first, ...rest] = relative(SRC, path).split('/');
  return rest.length === 0 ? '' : first!;
}

/** folder -> the folders its files import from, each with one file and import that shows it. */
function folderImports(): Map<string, Map<string, string>> {
  const graph = new Map<string, Map<string, string>>();
  for (const file of sourceFiles()) {
    const from = folderOf(file);
    const edges = graph.get(from) ?? new Map<string, string>();
    graph.set(from, edges);
    for (const { target, specifier } of importsOf(file)) {
      const to = folderOf(target);
      if (to !== from && !edges.has(to)) edges.set(to, `${relative(REPO_ROOT, file)} imports ${specifier}`);
    }
  }
  return graph;
}

/** A loop of folders, as the imports that make it, or undefined when there is none. */
function findLoop(graph: Map<string, Map<string, string>>): string[] | undefined {
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (folder: string): string[] | undefined => {
    state.set(folder, 'open');
    path.push(folder);
    for (const [next] of graph.get(folder) ?? []) {
      if (state.get(next) === 'open') {
        const start = path.indexOf(next);
        const loop = [...path.slice(start), next];
        return loop
          .slice(0, -1)
          .map((f, i) => `${f || 'index'} -> ${loop[i + 1] || 'index'}: ${graph.get(f)!.get(loop[i + 1]!)}`);
      }
      if (!state.has(next)) {
        const found = visit(next);
        if (found) return found;
      }
    }
    path.pop();
    state.set(folder, 'done');
    return undefined;
  };
  for (const folder of graph.keys()) {
    if (!state.has(folder)) {
      const found = visit(folder);
      if (found) return found;
    }
  }
  return undefined;
}

describe("src/'s folders", () => {
  it('import one another without a loop: no import runs from a lower folder up to a higher one', () => {
    const graph = folderImports();
    // The reading works: the core's folder imports several others, and the ground floor none.
    expect(graph.get('daemon')?.size).toBeGreaterThan(5);
    expect(graph.get('clock')?.size ?? 0).toBe(0);
    expect(findLoop(graph)).toBeUndefined();
  });

  it('hold no file that imports, through others, a file that imports it', () => {
    const graph = fileImports();
    expect(graph.get('daemon/core.ts')?.size).toBeGreaterThan(10);
    expect(findLoop(graph)).toBeUndefined();
  });

  it('finds a loop where there is one (the check itself)', () => {
    const graph = new Map([
      ['config', new Map([['secrets', 'src/config/describe.ts imports ../secrets/redact.ts']])],
      ['secrets', new Map([['config', 'src/secrets/api-key-file.ts imports ../config/checks.ts']])],
    ]);
    expect(findLoop(graph)).toEqual([
      'config -> secrets: src/config/describe.ts imports ../secrets/redact.ts',
      'secrets -> config: src/secrets/api-key-file.ts imports ../config/checks.ts',
    ]);
  });
});
