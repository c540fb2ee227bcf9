// The API key never reaches a log line, whatever goes wrong and however it is sent (query mode puts it in URLs).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.ts';
import { standaloneDaemon } from '../../src/standalone/standalone-mode.ts';
import { Emulator } from '../../src/emulator/index.ts';
import { defineTask } from '../../src/handlers/define-task.ts';
import { createLogger } from '../../src/telemetry/logger.ts';
import { waitFor } from './harness.ts';

const KEY = 'sk-live-6f1c9e0b7a2d4e58';

describe('the API key in logs', () => {
  for (const authMode of ['header', 'query', 'bearer'] as const) {
    it(`never appears in any log line through network errors, timeouts, 5xx and 401 (${authMode})`, async () => {
      const emulator = new Emulator({ apiKeys: [KEY] });
      const url = await emulator.listen();
      const stateDir = await mkdtemp(join(tmpdir(), 'df-secrets-'));
      let text = '';
      const sink = new Writable({
        write(chunk: Buffer, _encoding, done) {
          text += chunk.toString();
          done();
        },
      });
      const config = loadConfig({
        env: {},
        overrides: {
          'api.url': url,
          'api.key': KEY,
          'api.authMode': authMode,
          'api.requestTimeoutMs': 300,
          'state.dir': stateDir,
          'scheduler.retryBaseMs': 10,
          'scheduler.errorBackoffMaxMs': 100,
          'scheduler.rateLimitPauseMs': 50,
        },
        require: 'service',
      });
      emulator.createTask({ key: 'echo' });
      const handlers = new Map([['echo', defineTask({ key: 'echo', handle: (i) => i })]]);
      const worker = standaloneDaemon({
        config,
        logger: createLogger({ level: 'trace', destination: sink }),
        handlers,
      });
      try {
        await worker.start();
        emulator.setFaults([
          { operation: 'tasks.poll', kind: 'drop', count: 1 },
          { operation: 'tasks.poll', kind: 'latency', ms: 1_000, count: 1 },
          {
            operation: 'tasks.poll',
            kind: 'status',
            status: 502,
            body: '<html>bad gateway</html>',
            count: 1,
          },
          { operation: 'executions.report', kind: 'dropAfterApply', count: 1 },
          { operation: 'executions.report', kind: 'status', status: 503, count: 1 },
          { operation: 'tasks.poll', kind: 'rateLimit', count: 1 },
          {
            operation: 'tasks.poll',
            kind: 'status',
            status: 401,
            body: JSON.stringify({ code: 'UNAUTHENTICATED', message: 'invalid key' }),
            contentType: 'application/json',
            count: 1,
          },
        ]);
        const e = emulator.enqueueExecution('echo', { x: 1 });
        worker.wake();
        await waitFor(
          () => emulator.executions().some((x) => x.id === e.id && x.reports.length > 0),
          'report',
          15_000,
        );
        await waitFor(
          () => text.includes('"statusCode":401') || text.includes('401'),
          'the 401 logged',
          10_000,
        );
      } finally {
        await worker.stop();
        await emulator.close();
        await rm(stateDir, { recursive: true, force: true });
      }
      expect(text.length).toBeGreaterThan(1_000);
      expect(text).toMatch(/poll failed|report failed/);
      expect(text).not.toContain(KEY);
      expect(text).not.toContain(encodeURIComponent(KEY));
    }, 30_000);
  }
});
