// The service's clock as its Date headers tell it, against the local monotonic clock: createdAt placed on the
// local timeline whatever the local wall clock reads.
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { ServiceClock } from '../../src/clock/service-clock.ts';

const SERVICE_START = Date.UTC(2026, 10, 27, 12, 0, 0, 400);

describe('ServiceClock', () => {
  it('knows nothing before an answer carried a Date, and ignores one it cannot read', () => {
    const clock = new ManualClock(0);
    const service = new ServiceClock(clock);
    service.observe(undefined);
    service.observe('not a date');
    expect(service.now()).toBeUndefined();
    expect(service.monotonicAt(SERVICE_START)).toBeUndefined();
  });

  it('places createdAt by the Date header, within the second it names, the local wall clock 10 min off', () => {
    // The local clock's wall face is 10 minutes behind the service's; only its monotonic face is used.
    const clock = new ManualClock(SERVICE_START - 600_000);
    const service = new ServiceClock(clock);
    const serviceNow = () => SERVICE_START + (clock.monotonic() - (SERVICE_START - 600_000));
    service.observe(new Date(serviceNow()).toUTCString());
    const createdAt = serviceNow() - 30_000;
    const waitedMs = clock.monotonic() - service.monotonicAt(createdAt)!;
    expect(waitedMs).toBeGreaterThan(30_000 - 1_000);
    expect(waitedMs).toBeLessThanOrEqual(30_000);
  });

  it('tightens with answers at other phases of the second, and follows the service clock back', async () => {
    const clock = new ManualClock(0);
    const service = new ServiceClock(clock);
    let offsetMs = SERVICE_START;
    const header = () => new Date(clock.monotonic() + offsetMs).toUTCString();
    service.observe(header());
    const first = service.now()!;
    await clock.advance(650);
    service.observe(header());
    // 400 ms into a second (the header 400 ms behind), then 50 ms into the next: within 50 ms now.
    expect(service.now()! - (clock.monotonic() + offsetMs)).toBe(-50);
    expect(service.now()! - first).toBe(650 + 350);
    offsetMs -= 3_600_000;
    service.observe(header());
    expect(Math.abs(service.now()! - (clock.monotonic() + offsetMs))).toBeLessThan(1_000);
  });

  it('reads createdAt on the local wall clock, to the millisecond, while it agrees with the Date headers', () => {
    const clock = new ManualClock(SERVICE_START);
    const service = new ServiceClock(clock);
    service.observe(new Date(SERVICE_START).toUTCString());
    expect(clock.monotonic() - service.monotonicAt(SERVICE_START - 150)!).toBe(150);
    // Stepped an hour back, the wall clock no longer agrees: the Date headers' offset places it.
    clock.step(-3_600_000);
    const waitedMs = clock.monotonic() - service.monotonicAt(SERVICE_START - 150)!;
    expect(waitedMs).toBeGreaterThan(150 - 1_000);
    expect(waitedMs).toBeLessThanOrEqual(150);
  });
});
