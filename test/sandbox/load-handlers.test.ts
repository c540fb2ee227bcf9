// Loading handler modules in a process of their own: declarations come back, broken files are named, and a
// module's top-level code sees the handlers' environment and cannot end the daemon.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { HandlerLoadErrors, HandlersDirectoryError } from '../../src/handlers/load-errors.ts';
import { loadHandlersIsolated } from '../../src/sandbox/load-handlers.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'df-load-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const env = { PATH: process.env.PATH ?? '' };

describe('loadHandlersIsolated', () => {
  it("returns each module's declaration and file; top-level code sees only the environment given", async () => {
    await writeFile(
      path.join(dir, 'echo.ts'),
      `import { defineTask } from 'df-worker';
       const seen = process.env.DF_API_KEY ?? 'no key';
       setInterval(() => undefined, 1_000); // a module that keeps a timer open still loads
       export default defineTask({ key: 'echo', description: seen, outputKeys: ['x'], timeoutMs: 1234, concurrency: 3, handle: (i) => i });`,
    );
    const handlers = await loadHandlersIsolated(dir, { env });
    const echo = handlers.get('echo');
    expect(echo).toMatchObject({
      key: 'echo',
      description: 'no key',
      timeoutMs: 1234,
      concurrency: 3,
      retryCount: 0,
      outputKeys: [{ key: 'x', description: '' }],
      file: path.join(dir, 'echo.ts'),
    });
    // The declaration never runs the handler in the daemon.
    expect(() => echo!.handle({}, undefined as never)).toThrow(/runs only in a handler worker/);
  });

  it('names every broken module', async () => {
    await writeFile(path.join(dir, 'good.mjs'), `export default { key: 'good', handle: () => ({}) };`);
    await writeFile(path.join(dir, 'broken.mjs'), `export default 42;`);
    const error = await loadHandlersIsolated(dir, { env }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HandlerLoadErrors);
    expect((error as HandlerLoadErrors).message).toContain(
      `${path.join(dir, 'broken.mjs')}: default export is a number`,
    );
  });

  it('reports a missing handlers folder as the loader does', async () => {
    const error = await loadHandlersIsolated(path.join(dir, 'missing'), { env }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HandlersDirectoryError);
    expect((error as Error).message).toMatch(/does not exist/);
  });

  it('fails the load, not the daemon, when a module calls process.exit at its top level', async () => {
    await writeFile(path.join(dir, 'exits.mjs'), `process.exit(9);`);
    await expect(loadHandlersIsolated(dir, { env })).rejects.toThrow(
      /exit code 9 \(process\.exit at its top level\?\)/,
    );
  });

  it('fails the load, naming the signal, when a module kills its own process at its top level', async () => {
    await writeFile(path.join(dir, 'kills.mjs'), `process.kill(process.pid, 'SIGKILL');`);
    await expect(loadHandlersIsolated(dir, { env })).rejects.toThrow(/ended its import killed by SIGKILL/);
  });

  it('gives up on a module whose top level never finishes, naming the folder', async () => {
    await writeFile(path.join(dir, 'blocks.mjs'), `for (;;) {}`);
    await expect(loadHandlersIsolated(dir, { env, timeoutMs: 300 })).rejects.toThrow(
      /took over 0.3 s; a module blocks at its top level/,
    );
  });
});
