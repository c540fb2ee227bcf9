// Tracing off (no OTLP endpoint) costs nothing: the daemon's modules, as `df-worker start` imports them, load
// neither the OpenTelemetry SDK nor its exporter (only @opentelemetry/api, which prom-client's CPU metric
// loaded before tracing existed); and settings.ts reads the SDK's variables as the SDK does.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/errors.ts';
import { tracesEndpoint } from '../../src/tracing/settings.ts';

describe('tracing off', () => {
  it('loads neither the OpenTelemetry SDK nor its exporter with the daemon', () => {
    // Every module URL resolved while the daemon's modules load (the standalone and the clustered daemon).
    const script = `
      const { registerHooks } = await import('node:module');
      const seen = [];
      registerHooks({ resolve(specifier, context, next) { const r = next(specifier, context); seen.push(r.url); return r; } });
      await import('./src/cli/commands/start.ts');
      await import('./src/cli/run-daemon.ts');
      await import('./src/standalone/standalone-mode.ts');
      await import('./src/clustered/clustered-mode.ts');
      await import('./src/sandbox/index.ts');
      console.log(JSON.stringify(seen));
    `;
    const result = spawnSync(
      process.execPath,
      ['--conditions=df-worker-source', '--input-type=module', '-e', script],
      { cwd: path.resolve(import.meta.dirname, '../..'), encoding: 'utf8', timeout: 30_000 },
    );
    expect(result.stderr).toBe('');
    const seen = JSON.parse(result.stdout) as string[];
    expect(seen.some((url) => url.includes('/src/daemon/core.ts'))).toBe(true);
    const loaded = seen.filter((url) => url.includes('/@opentelemetry/') || url.includes('/src/tracing/'));
    // settings.ts (is tracing on?) and noop-span.ts (ctx.span when off) import nothing at run time.
    expect(
      loaded.filter((url) => !/\/@opentelemetry\/api\/|\/src\/tracing\/(settings|noop-span)\.ts$/.test(url)),
    ).toEqual([]);
  });

  it('is on with an OTLP endpoint, unless the SDK is disabled or the exporter is none', () => {
    expect(() => tracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'otel-collector:4318' })).toThrow(ConfigError);
    expect(() => tracesEndpoint({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'ftp://c' })).toThrow(
      /OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: must be the collector's http/,
    );
    expect(tracesEndpoint({})).toBeUndefined();
    expect(tracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: ' ' })).toBeUndefined();
    expect(tracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' })).toBe('http://c:4318');
    expect(
      tracesEndpoint({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:4318/v1/traces',
      }),
    ).toBe('http://t:4318/v1/traces');
    expect(
      tracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true' }),
    ).toBeUndefined();
    expect(
      tracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none' }),
    ).toBeUndefined();
  });
});
