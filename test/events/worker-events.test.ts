// Events tell: a payload is read-only. Where NODE_ENV is test (as under vitest) or development, the emitter
// freezes each payload, nested values included, so a listener that writes one throws at once; elsewhere (a
// daemon in production, or started without NODE_ENV) the freeze is skipped (its cost on every emit).
import { afterEach, describe, expect, it, vi } from 'vitest';
import { WorkerEvents } from '../../src/events/worker-events.ts';

afterEach(() => {
  vi.unstubAllEnvs();
});

/** A listener that writes the payload it hears (what the type forbids; a cast stands for a careless one). */
function writer(events: WorkerEvents): { writes: () => unknown[] } {
  const errors: unknown[] = [];
  events.on('outcome', (payload) => {
    try {
      (payload.outcome.output as Record<string, unknown>).note = 'written by a listener';
    } catch (error) {
      errors.push(error);
    }
    try {
      (payload as { task: string }).task = 'another';
    } catch (error) {
      errors.push(error);
    }
  });
  return { writes: () => errors };
}

const outcome = () => ({
  task: 'greet',
  executionId: 'e1',
  outcome: { status: 'COMPLETED' as const, output: { greeting: 'hello' }, attempts: 1, durationMs: 5 },
});

describe('WorkerEvents', () => {
  it('throws a TypeError at a listener that writes a payload, nested values too (development build)', () => {
    expect(process.env.NODE_ENV).toBe('test');
    const events = new WorkerEvents();
    const { writes } = writer(events);
    const seen: unknown[] = [];
    events.on('outcome', (payload) => seen.push(payload.outcome.output));
    const payload = outcome();
    events.emit('outcome', payload);
    expect(writes()).toHaveLength(2);
    for (const error of writes()) expect(error).toBeInstanceOf(TypeError);
    // The next listener, and the emitter, see the payload as it was emitted.
    expect(seen).toEqual([{ greeting: 'hello' }]);
    expect(payload.task).toBe('greet');
    expect(Object.isFrozen(payload.outcome.output)).toBe(true);
  });

  it.each(['production', ''])(
    'skips the freeze with NODE_ENV=%j: a write goes through, as no check is paid',
    (nodeEnv) => {
      vi.stubEnv('NODE_ENV', nodeEnv);
      const events = new WorkerEvents();
      const { writes } = writer(events);
      const payload = outcome();
      events.emit('outcome', payload);
      expect(writes()).toEqual([]);
      expect(Object.isFrozen(payload)).toBe(false);
      expect(payload.outcome.output).toEqual({ greeting: 'hello', note: 'written by a listener' });
    },
  );

  it('freezes with NODE_ENV=development', () => {
    vi.stubEnv('NODE_ENV', 'development');
    const payload = outcome();
    new WorkerEvents().emit('outcome', payload);
    expect(Object.isFrozen(payload.outcome)).toBe(true);
  });

  it('freezes arrays in a payload, and an explicit freezePayloads wins over NODE_ENV', () => {
    const served = ['a', 'b'];
    const frozen = new WorkerEvents({ freezePayloads: true });
    frozen.emit('tasks', { served, withoutTask: [] });
    expect(() => served.push('c')).toThrow(TypeError);
    const open = new WorkerEvents({ freezePayloads: false });
    const later = ['a'];
    open.emit('tasks', { served: later, withoutTask: [] });
    later.push('b');
    expect(later).toEqual(['a', 'b']);
  });
});
