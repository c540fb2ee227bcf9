// Whether df-worker exports traces: the OpenTelemetry SDK's own environment variables decide (an OTLP endpoint
// set, the SDK not disabled). Read before anything of OpenTelemetry is imported, so a daemon without tracing
// loads none of it.
import { ConfigError } from '../config/errors.ts';

/**
 * The OTLP/HTTP endpoint traces go to, or undefined when tracing is off. Throws ConfigError for an endpoint
 * that is not an http(s) URL: the SDK would accept it and fail every export.
 */
export function tracesEndpoint(env: NodeJS.ProcessEnv): string | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  const exporters = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase();
  if (exporters === 'none') return undefined;
  const variable = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim()
    ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'
    : 'OTEL_EXPORTER_OTLP_ENDPOINT';
  const endpoint = env[variable]?.trim();
  if (endpoint === undefined || endpoint === '') return undefined;
  if (!/^https?:\/\/[^/?#\s]+/i.test(endpoint) || !URL.canParse(endpoint)) {
    throw new ConfigError([
      {
        setting: variable,
        message: `must be the collector's http:// or https:// URL (e.g. http://otel-collector:4318), got ${JSON.stringify(endpoint)}`,
      },
    ]);
  }
  return endpoint;
}

/** The service name traces carry when OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) is unset. */
export const DEFAULT_SERVICE_NAME = 'df-worker';

/** Longest wait for the last spans to leave at shutdown, in ms: the exit is never held up longer. */
export const SHUTDOWN_FLUSH_MS = 5_000;
