// Which module system Node applies to a `.ts`/`.js` file: the `type` of the nearest package.json. `df-worker new`
// picks the extension of the files it writes from it, and the loader names it when a handler fails as CommonJS.
import { readFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * Whether Node reads a `.ts` or `.js` file in a folder as an ES module: only when the nearest package.json says
 * `"type": "module"`. Otherwise (`npm init` writes `"type": "commonjs"`) a module with `import` statements needs
 * the `.mts`/`.mjs` extension, which is an ES module under any package.json.
 */
export type ModuleScope = 'module' | 'commonjs';

/** The nearest package.json above a folder and whether it makes `.ts`/`.js` files ES modules. */
export interface PackageScope {
  scope: ModuleScope;
  /** Absolute path of that package.json; undefined when there is none up to the root. */
  packageJson: string | undefined;
}

/** The module scope Node applies to files in `dir` (which may not exist yet), looked up as Node does. */
export async function packageScope(dir: string): Promise<PackageScope> {
  for (let folder = path.resolve(dir); ; folder = path.dirname(folder)) {
    const file = path.join(folder, 'package.json');
    let text: string | undefined;
    try {
      text = await readFile(file, 'utf8');
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ENOTDIR') throw error;
    }
    if (text !== undefined) {
      let type: unknown;
      try {
        type = (JSON.parse(text) as { type?: unknown }).type;
      } catch {
        type = undefined;
      }
      return { scope: type === 'module' ? 'module' : 'commonjs', packageJson: file };
    }
    if (path.dirname(folder) === folder) return { scope: 'commonjs', packageJson: undefined };
  }
}
