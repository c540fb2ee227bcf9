// Node's compile cache (enabled by the CLI at start) for the handler workers and the loading process: a worker
// thread or child process uses it only when its environment names the folder. A thread writes what it compiled
// when it ends; saveCompileCache writes it sooner, for a daemon that is killed rather than stopped.
import { flushCompileCache, getCompileCacheDir } from 'node:module';

/** `env` with NODE_COMPILE_CACHE naming this process's cache folder, when it has one and `env` names none. */
export function withCompileCache(env: Record<string, string>): Record<string, string> {
  const folder = getCompileCacheDir();
  if (folder === undefined || env.NODE_COMPILE_CACHE !== undefined) return env;
  return { ...env, NODE_COMPILE_CACHE: folder };
}

/** Writes what this thread compiled so far to the cache, if it has one: a worker may be terminated any time. */
export function saveCompileCache(): void {
  if (getCompileCacheDir() !== undefined) flushCompileCache();
}
