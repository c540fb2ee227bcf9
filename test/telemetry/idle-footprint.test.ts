// What the daemon loads of node and of its libraries decides much of its idle memory (bench:footprint): node's
// own undici (through an ESM import of node:http, whose namespace reads its lazy WebSocket) is about 5 MB, TLS
// (node:https, from prom-client's index and its Pushgateway) about 9 MB more. Each test runs a fresh node, as
// the daemon starts, and lists what it loaded.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/** The builtins a fresh node loaded, after importing what `df-worker start` imports and building its client. */
function loadedAfterStart(origin: string): string[] {
  const script = `
    await import('./src/cli/run-daemon.ts');
    const { Transport } = await import('./src/api/transport.ts');
    const { WorkerMetrics } = await import('./src/telemetry/metrics.ts');
    const { WorkerHttpServer } = await import('./src/telemetry/http-server.ts');
    new Transport({ origin: ${JSON.stringify(origin)}, connectTimeoutMs: 1000, headersTimeoutMs: 1000,
      bodyTimeoutMs: 1000, requestTimeoutMs: 1000, answerTimeoutMs: 1000, connections: 4, urlSetting: 'DF_API_URL' }, (t) => t);
    new WorkerMetrics();
    console.log(JSON.stringify({ server: typeof WorkerHttpServer, loaded: process.moduleLoadList }));
  `;
  const result = spawnSync(
    process.execPath,
    ['--conditions=df-worker-source', '--input-type=module', '-e', script],
    { cwd: path.resolve(import.meta.dirname, '../..'), encoding: 'utf8', timeout: 30_000 },
  );
  expect(result.stderr).toBe('');
  expect(result.status).toBe(0);
  const { server, loaded } = JSON.parse(result.stdout) as { server: string; loaded: string[] };
  expect(server).toBe('function');
  return loaded;
}

const heavy = (loaded: string[]) => loaded.filter((m) => /undici|\btls\b|\bhttps\b/.test(m));

describe("the daemon's idle footprint", () => {
  it("loads neither TLS nor node's own undici when the service URL is http", () => {
    const loaded = loadedAfterStart('http://127.0.0.1:9');
    expect(loaded).toContain('NativeModule http');
    expect(heavy(loaded)).toEqual([]);
  });

  it('loads TLS once the service URL is https (what the first test would see if anything loaded it)', () => {
    expect(heavy(loadedAfterStart('https://127.0.0.1:9'))).toContain('NativeModule tls');
  });
});
