// Issue 5, scenario 8: the state folder stops accepting writes mid-run, then comes back.
import { describe, expect, it } from 'vitest';
import { JOURNAL_RECHECK_MS, unwritableStateFolder } from './scenarios.ts';

describe('an unwritable journal folder', () => {
  it('stops claiming (no poll, /readyz 503 naming the journal), still reports what it claimed, resumes once the folder is back, and leaves nothing to replay', async () => {
    const result = await unwritableStateFolder();
    expect(result.readyWhileBroken.status).toBe(503);
    // The folder is moved away before a file takes its place: a write in between sees ENOENT, one after
    // it ENOTDIR or EEXIST. Each is the truth at that instant, and the reason names the folder and the code.
    expect(result.readyWhileBroken.journalReason).toMatch(
      /state folder \S+journal .*\b(ENOTDIR|EEXIST|ENOENT)\b/,
    );
    expect(result.readyMetricWhileBroken).toBe(0);
    expect(result.pollsWhileBlocked).toBe(0);
    expect(result.claimedWhileBroken).toBeGreaterThanOrEqual(4);
    // The folder is tried again every JOURNAL_RECHECK_MS; the first try after the repair succeeds.
    expect(result.resumedAfterMs).toBeLessThan(JOURNAL_RECHECK_MS + 2_000);
    // Records of executions reported while the folder was away are removed once it is back: a restart
    // has nothing to replay and reports nothing twice.
    expect(result.recordsAfterStop).toEqual([]);
    expect(result.reportsAfterRestart).toBe(0);
    expect(result.journalAfterRestart).toEqual([]);
    expect(result.figures).toEqual({ claimed: 12, reported: 12, duplicated: 0, lost: 0 });
    expect(result.tally.wrong).toBe(0);
  }, 40_000);
});
