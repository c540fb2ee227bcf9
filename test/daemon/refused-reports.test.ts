// A report the service refuses for good becomes one sample of dfworker_reports_refused_total, labelled by the
// service's status and code; a code that is not one (an odd body) cannot grow the label set.
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock/clock.ts';
import { WorkerEvents } from '../../src/events/worker-events.ts';
import { listenForTelemetry } from '../../src/daemon/telemetry-listener.ts';
import { WorkerMetrics } from '../../src/telemetry/metrics.ts';

const refused = (status: number, code?: string) => ({
  task: 'digest',
  executionId: 'execution-1',
  status,
  ...(code === undefined ? {} : { code }),
  message: 'refused',
});

describe('dfworker_reports_refused_total', () => {
  it('counts each refusal by status and code, and keeps odd codes out of the label', async () => {
    const events = new WorkerEvents();
    const metrics = new WorkerMetrics({ defaultMetrics: false });
    listenForTelemetry(events, metrics, pino({ level: 'silent' }), systemClock);
    events.emit('reportRefused', refused(409, 'CONFLICT'));
    events.emit('reportRefused', refused(409, 'CONFLICT'));
    events.emit('reportRefused', refused(404, 'NOT_FOUND'));
    events.emit('reportRefused', refused(410));
    events.emit('reportRefused', refused(400, '<html>bad gateway</html>'));
    const text = await metrics.render();
    const samples = [...text.matchAll(/^dfworker_reports_refused_total\{reason="([^"]*)"\} (\S+)$/gm)].map(
      ([, reason, value]) => [reason, Number(value)],
    );
    expect(Object.fromEntries(samples)).toEqual({
      '409_CONFLICT': 2,
      '404_NOT_FOUND': 1,
      '410': 1,
      '400': 1,
    });
  });
});
