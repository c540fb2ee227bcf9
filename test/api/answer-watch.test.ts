// The request time limits on a fake clock: each limit acts only after a turn of the loop for I/O, and only if
// nothing arrived meanwhile; the whole answer has its own deadline, however its chunks are spaced.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { AnswerWatch } from '../../src/api/answer-watch.ts';
import type { TimeoutPhase } from '../../src/api/errors.ts';

const LIMITS = { requestTimeoutMs: 1_000, headersTimeoutMs: 600, bodyTimeoutMs: 300, answerTimeoutMs: 5_000 };

beforeEach(() => {
  vi.useFakeTimers({
    toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'performance'],
  });
});
afterEach(() => {
  vi.useRealTimers();
});

function watch(): { watch: AnswerWatch; expired: TimeoutPhase[] } {
  const expired: TimeoutPhase[] = [];
  return { watch: new AnswerWatch(LIMITS, (phase) => expired.push(phase)), expired };
}

describe('AnswerWatch', () => {
  it('expires at requestTimeoutMs, after a turn, when the request was never sent', () => {
    const { expired } = watch();
    vi.advanceTimersByTime(999);
    expect(expired).toEqual([]);
    vi.advanceTimersToNextTimer(); // the deadline falls due and waits a turn
    expect(expired).toEqual([]);
    vi.advanceTimersToNextTimer(); // the turn: nothing arrived
    expect(expired).toEqual(['request']);
  });

  it('does not cut an answer whose headers were read during the turn', () => {
    const { watch: w, expired } = watch();
    w.sent();
    vi.advanceTimersToNextTimer(); // headersTimeoutMs falls due
    w.headers(); // the poll phase reads the headers that waited in the socket
    vi.advanceTimersToNextTimer();
    expect(expired).toEqual([]);
  });

  it('leaves a request written during the deadline turn to headersTimeoutMs', () => {
    const { watch: w, expired } = watch();
    vi.advanceTimersToNextTimer(); // the deadline falls due while the request is still being sent
    w.sent(); // the loop was held: the request leaves in the very turn
    vi.advanceTimersToNextTimer();
    expect(expired).toEqual([]);
    vi.advanceTimersByTime(LIMITS.headersTimeoutMs + 1);
    expect(expired).toEqual(['headers']);
  });

  it('lets a body that keeps coming run past requestTimeoutMs, and cuts it after bodyTimeoutMs of silence', () => {
    const { watch: w, expired } = watch();
    w.sent();
    w.headers();
    for (let i = 0; i < 10; i++) {
      vi.advanceTimersByTime(250);
      w.chunk();
    }
    expect(expired).toEqual([]);
    vi.advanceTimersByTime(LIMITS.bodyTimeoutMs + 1);
    expect(expired).toEqual(['body']);
  });

  it('does not cut a body whose next chunk was read during the turn', () => {
    const { watch: w, expired } = watch();
    w.sent();
    w.headers();
    vi.advanceTimersToNextTimer(); // bodyTimeoutMs falls due
    w.chunk();
    vi.advanceTimersToNextTimer();
    expect(expired).toEqual([]);
    vi.advanceTimersByTime(LIMITS.bodyTimeoutMs + 1);
    expect(expired).toEqual(['body']);
  });

  it('cuts an answer that trickles (every gap under bodyTimeoutMs) at answerTimeoutMs, counted from sending', () => {
    const { watch: w, expired } = watch();
    w.sent();
    vi.advanceTimersByTime(100);
    w.headers();
    // One chunk every 250 ms: the silence limit (300 ms) never passes.
    for (let elapsed = 100; elapsed < LIMITS.answerTimeoutMs - 250; elapsed += 250) {
      vi.advanceTimersByTime(250);
      w.chunk();
    }
    expect(expired).toEqual([]);
    vi.advanceTimersByTime(250);
    w.chunk();
    vi.advanceTimersToNextTimer(); // the turn after the deadline
    expect(expired).toEqual(['answer']);
  });

  it('leaves an answer that ended before its deadline alone', () => {
    const { watch: w, expired } = watch();
    w.sent();
    w.headers();
    w.chunk();
    w.stop();
    vi.advanceTimersByTime(LIMITS.answerTimeoutMs * 2);
    expect(expired).toEqual([]);
  });

  it('expires nothing once stopped', () => {
    const { watch: w, expired } = watch();
    w.sent();
    w.stop();
    vi.advanceTimersByTime(10_000);
    expect(expired).toEqual([]);
  });
});
