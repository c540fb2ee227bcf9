// Issue 9, row 15: kill -9 and an immediate restart, five times within a minute, with work pending, under
// the service's normal limits (5 per second, 50 per minute). The per-second and per-minute windows must
// survive the kills, as the service's do. Slow on purpose (about 65 s): the six daemons need more than a
// minute's 50 requests, so a daemon that keeps to the windows waits for the minute to pass.
import { describe, expect, it } from 'vitest';
import { killRestartLoop } from './handler-scenarios.ts';

describe('kill -9 and restart in a loop', () => {
  it('five kills within a minute with work pending: no 429, at most 5 requests in any second and 50 in any minute at the service, nothing lost', async () => {
    const result = await killRestartLoop();
    expect(result.kills).toBe(5);
    expect(result.killsWithinMs).toBeLessThan(60_000);
    // Every kill came with all slots busy and journaled: no poll answer was lost to a kill.
    expect(result.killsUnguarded).toBe(0);
    expect(result.figures.rateLimited, `requests before each 429: ${result.around429.join(' | ')}`).toBe(0);
    expect(result.maxPerSecond).toBeLessThanOrEqual(5);
    expect(result.maxPerMinute).toBeLessThanOrEqual(50);
    expect(result.figures).toEqual(expect.objectContaining({ claimed: 28, reported: 28, lost: 0 }));
    expect(result.tally.wrong).toBe(0);
    expect(result.figures.liveness).toEqual(
      expect.objectContaining({ unexpectedExits: 0, responsive: true }),
    );
  }, 150_000);
});
