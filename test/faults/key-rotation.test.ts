// Issue 36's key row: the API key revoked, then a new one written to DF_API_KEY_FILE. At 1a0690a the file was
// read once (15 × 401 in 180 s, 5 of them from /wake; only a restart took the new key). Now: one poll per
// back-off step whatever /wake does, /readyz and /metrics say why, and the new key is taken without a restart.
import { describe, expect, it } from 'vitest';
import { KEY_BACKOFF_MS, keyRotation, REFUSED_FOR_MS } from './key-rotation-scenarios.ts';

describe('an API key revoked, then replaced in DF_API_KEY_FILE', () => {
  it('tries the refused key once per back-off step, says why, and resumes on the new key without a restart', async () => {
    const r = await keyRotation();
    // One poll per back-off step (the first 401, then one per step), whatever the 24 wakes asked; one more for
    // the task list's or a report's own retry at most.
    expect(r.wakes).toBeGreaterThanOrEqual(20);
    expect(r.unauthorized).toBeGreaterThanOrEqual(1);
    expect(r.unauthorized).toBeLessThanOrEqual(Math.ceil(REFUSED_FOR_MS / KEY_BACKOFF_MS) + 2);
    expect(r.readyz.status).toBe(503);
    expect(r.readyz.reason).toContain('DF_API_KEY_FILE');
    expect(r.readyz.reason).toContain('401');
    expect(r.refusedGauge).toBe(1);
    expect(r.unauthorizedCounted).toBeGreaterThanOrEqual(r.unauthorized);
    expect(r.daemonRestarted).toBe(false);
    // Taken at once from the file's change (watch), not at the next back-off step.
    expect(r.resumedAfterMs).toBeDefined();
    expect(r.resumedAfterMs!).toBeLessThan(1_500);
    expect(r.tally).toMatchObject({ lost: 0, duplicated: 0, wrong: 0, unclaimed: 0, reported: 6 });
    expect(r.completed).toBe(true);
  }, 60_000);
});
