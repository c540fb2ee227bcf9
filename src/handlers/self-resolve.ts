// Lets handler modules that live outside this package `import { defineTask } from 'df-worker'`: a resolve hook
// maps the bare specifier to the very entry this code runs from, so handlers and runner share one module instance.
import { existsSync } from 'node:fs';
import module from 'node:module';
import { fileURLToPath } from 'node:url';

const PACKAGE_NAME = 'df-worker';
let registered = false;

/**
 * Registers the hook once per process. Returns false when this Node has no `module.registerHooks`
 * (before 22.15): handlers then resolve `df-worker` through node_modules as usual.
 */
export function registerSelfResolution(): boolean {
  if (registered) return true;
  if (typeof module.registerHooks !== 'function') return false;
  const entryUrl = packageEntryUrl();
  module.registerHooks({
    resolve(specifier, context, nextResolve) {
      if (specifier === PACKAGE_NAME) return { url: entryUrl, shortCircuit: true };
      return nextResolve(specifier, context);
    },
  });
  registered = true;
  return true;
}

/** `src/index.ts` when running from source, `dist/index.js` when running the build. */
export function packageEntryUrl(): string {
  const source = new URL('../index.ts', import.meta.url);
  if (existsSync(fileURLToPath(source))) return source.href;
  return new URL('../index.js', import.meta.url).href;
}
