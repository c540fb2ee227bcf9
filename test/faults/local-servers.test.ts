// Issue 36's rows for the local servers, on the real processes. At 1a0690a: `df-worker emulator` let a page of
// another origin enqueue, create variables (through /__admin and the service routes with ?api_key=), claim
// through a poll and reset, and read /__admin under a foreign Host; `df-worker dev` took the fixed dev-key from
// the query, answered a rebound Host and any origin on /wake and /metrics; the status page showed an input
// value quoted by a handler's error and answered any Host. Now none of it takes effect.
import { describe, expect, it } from 'vitest';
import {
  devFromAnotherSite,
  emulatorFromAnotherSite,
  INPUT_SECRET,
  statusPageLeak,
} from './local-servers-scenarios.ts';

describe('local servers and a page of another site', () => {
  it('df-worker emulator: no enqueue, variable, claim, reset or foreign-Host read takes effect', async () => {
    const r = await emulatorFromAnotherSite();
    expect(r.tookEffect).toEqual([]);
    expect(r.tried).toBe(6);
  }, 60_000);

  it('df-worker dev: no fixed key, no foreign-Host read, no cross-site /wake, no foreign-Host /metrics', async () => {
    const r = await devFromAnotherSite();
    expect(r.tookEffect).toEqual([]);
    expect(r.tried).toBe(4);
  }, 60_000);

  it("the status page shows the FAILED state but not the handler's message, and refuses a foreign Host", async () => {
    const r = await statusPageLeak();
    expect(r.tookEffect).toEqual([]);
    expect(r.completed).toBe(true);
  }, 60_000);

  it('the status page shows handler messages when DF_HTTP_STATUS_PAGE_DETAILS asks for them', async () => {
    const r = await statusPageLeak({ DF_HTTP_STATUS_PAGE_DETAILS: 'true' });
    expect(r.page).toContain(INPUT_SECRET);
  }, 60_000);
});
