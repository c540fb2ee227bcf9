// Issue 26, item 6: a flood on the metrics port does not starve the daemon (see metrics-flood-scenarios.ts).
// The suite floods for 8 s; bench:faults runs the 20 s flood of the issue.
import { describe, expect, it } from 'vitest';
import { floodSummary, metricsFlood, type MetricsFloodResult } from './metrics-flood-scenarios.ts';

/** P(X >= k) for X ~ Binomial(n, p). */
function binomialTail(n: number, k: number, p: number): number {
  let term = (1 - p) ** n; // P(X = 0)
  let below = 0;
  for (let i = 0; i < k; i++) {
    below += term;
    term *= ((n - i) / (i + 1)) * (p / (1 - p));
  }
  return Math.max(0, 1 - below);
}

function expectDaemonUnharmed(r: MetricsFloodResult): void {
  console.log(floodSummary(r));
  expect(r.daemonRunning).toBe(true);
  expect(r.figures.lost).toBe(0);
  expect(r.tally.wrong).toBe(0);
  expect(r.budget.rateLimited).toBe(0);
  expect(r.budget.maxPerSecond).toBeLessThanOrEqual(5);
  expect(r.budget.maxPerMinute).toBeLessThanOrEqual(50);
  expect(r.floodedRate).toBeGreaterThanOrEqual(0.75 * r.unfloodedRate);
  // The flooding clients' own timings of /healthz (p99 and slowest, printed) are not asserted: they time the
  // flooder's event loop as much as the daemon (1,764 ms slowest once in a full run, a p99 of 1,593 ms beside
  // two busy loops), while the kubelet-like probes below, each timed alone, must each answer within 1 s.
  // The kubelet's probes go to the probe port (DF_HTTP_PROBE_PORT, as the chart sets it), whose accept queue and
  // connection line the flood does not share. On the flooded port a probe's connection waits behind the flood's
  // (in the kernel's accept queue, then in the line the port lets in at its pace): before the pace, 6/13, 18/22
  // and 9/14 probes ok there in three idle runs (4 timeouts in a row), against 81/81 on the probe port; paced,
  // 17/17, slowest 597 ms, beside two busy loops. Those are printed, not bounded. Here: never three failures in
  // a row, where kubelet acts (failureThreshold's default).
  expect(r.probes.sent).toBeGreaterThanOrEqual(20);
  expect(r.probes.longestFailureRun).toBeLessThan(3);
  // At most 1 in 20 fail: with some 22 probes a count cannot show a rate that fine (2 failures, 9%, came once
  // beside two busy loops; at a true 3%, 2 or more come in 1 run of 7). So the count must not prove the rate
  // above 5%: at 5%, a count this high or higher would come in more than 1 run of 1,000.
  expect(binomialTail(r.probes.sent, r.probes.failed, 0.05)).toBeGreaterThan(0.001);
  // A probe slower than kubelet's 1 s timeout is one of those failures, as kubelet counts it (1,002 ms came once
  // beside two busy loops); the slowest that passed is printed.
}

describe('the probes bound (the check itself)', () => {
  it('binomialTail: 2 of 22 does not prove a rate above 5%; 6 of 22 does', () => {
    expect(binomialTail(22, 0, 0.05)).toBe(1);
    expect(binomialTail(22, 2, 0.05)).toBeCloseTo(0.3018, 3);
    expect(binomialTail(22, 5, 0.05)).toBeGreaterThan(0.001);
    expect(binomialTail(22, 6, 0.05)).toBeLessThan(0.001);
  });
});

describe('a flood on the metrics port', () => {
  it('500 clients on /metrics and /healthz for 8 s: reports keep 3/4 of their rate, /healthz answers within 1 s', async () => {
    const r = await metricsFlood({ clients: 500, floodMs: 8_000 });
    expectDaemonUnharmed(r);
    const answered = (path: string) =>
      Object.values(r.flood.paths[path]?.answers ?? {}).reduce((a, b) => a + b, 0);
    // The flood did hammer, far beyond any scraper or prober, and was answered at the port's pace
    // (DF_HTTP_MAX_REQUESTS_PER_SECOND, 1,000 and as many at once): 8,947 in 8 s once, against some 75,000
    // unpaced, when the daemon spent 20% of a core on it and the flooder 13% (31% and 28% unpaced).
    const total = answered('/metrics') + answered('/healthz');
    expect(total).toBeGreaterThan(1_000);
    expect(total).toBeLessThanOrEqual(1_000 * (r.flood.elapsedMs / 1_000) + 1_000);
  }, 60_000);

  it('50 slowloris, 50 silent and 5 oversized-header sockets besides 200 clients change none of that', async () => {
    const r = await metricsFlood({
      clients: 200,
      floodMs: 8_000,
      slowloris: 50,
      silent: 50,
      hugeHeaders: 5,
    });
    expectDaemonUnharmed(r);
    expect(Object.keys(r.flood.paths['oversized headers']?.answers ?? {})).toEqual(['431']);
  }, 60_000);
});
