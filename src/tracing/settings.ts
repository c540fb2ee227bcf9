// Whether df-worker exports traces: the OpenTelemetry SDK's own environment variables decide (an OTLP endpoint
// set, the SDK not disabled). Read before anything of OpenTelemetry is imported, so a daemon without tracing
// loads none of it.

/** The OTLP/HTTP endpoint traces go to, or undefined when tracing is off. */
export function tracesEndpoint(env: NodeJS.ProcessEnv): string | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  const exporters = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase();
  if (exporters === 'none') return undefined;
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  return endpoint === '' ? undefined : endpoint;
}

/** The service name traces carry when OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) is unset. */
export const DEFAULT_SERVICE_NAME = 'df-worker';

/** Longest wait for the last spans to leave at shutdown, in ms: the exit is never held up longer. */
export const SHUTDOWN_FLUSH_MS = 5_000;
