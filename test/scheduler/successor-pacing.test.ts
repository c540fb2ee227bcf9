// Successor pacing on the manual clock: a reported step brings its successor's polls forward (a burst
// before any history, the learned delays after), they stop once it arrived or the window passed, and the
// job definitions are read into the right pairs of steps.
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock/manual-clock.ts';
import { PipelineModel, type JobDefinition } from '../../src/scheduler/pipeline-model.ts';
import { DEFAULT_BURST_MS, jobIdOf, SuccessorPacing } from '../../src/scheduler/successor-pacing.ts';

const JOBS: JobDefinition[] = [
  {
    key: 'enrich',
    pipeline: 'p1',
    tasks: [
      { name: 'acme/extract', type: 'SUB_WORKFLOW' },
      { name: 'wait', type: 'BUILTIN', durationMs: 30_000 },
      { name: 'publish', type: 'BUILTIN', durationMs: 10_000 },
      { name: 'acme/translate', type: 'SUB_WORKFLOW' },
      { name: 'acme/unserved', type: 'SUB_WORKFLOW' },
    ],
  },
];

describe('the pipeline model', () => {
  const model = new PipelineModel(JOBS, ['extract', 'translate', 'lonely']);

  it('finds the next custom step past built-in steps, and none when that task is not served', () => {
    expect(model.successorOf('enrich', 0)).toEqual({
      job: 'enrich',
      from: 0,
      to: 3,
      task: 'translate',
      builtInsBetween: 2,
    });
    expect(model.successorOf('enrich', 3)).toBeUndefined();
  });

  it('tells first steps and tasks of no job (idle polls) from later steps (polled after a report)', () => {
    expect(model.arrivesUnannounced('extract')).toBe(true);
    expect(model.arrivesUnannounced('translate')).toBe(false);
    expect(model.arrivesUnannounced('lonely')).toBe(true);
    expect(model.inAnyJob('lonely')).toBe(false);
  });
});

describe('successor pacing', () => {
  const model = new PipelineModel(JOBS, ['extract', 'translate']);
  const successor = model.successorOf('enrich', 0)!;

  it('polls the successor in a burst after a report before any history, and stops when it arrived', () => {
    const clock = new ManualClock(1_000_000);
    const pacing = new SuccessorPacing(clock);
    expect(pacing.nextPollAt('translate')).toBeUndefined();
    pacing.reported(successor, 'run-1');
    expect(pacing.nextPollAt('translate')).toBe(1_000_000 + DEFAULT_BURST_MS[0]!);
    // Polls at the burst's instants find nothing until the step was created 40 s after the report.
    const polls: number[] = [];
    for (;;) {
      const at = pacing.nextPollAt('translate')!;
      clock.set(at);
      polls.push(at - 1_000_000);
      if (at - 1_000_000 >= 40_000) {
        expect(pacing.arrived('translate', 1_040_000, 'run-1')).toBe(true);
        break;
      }
      pacing.polled('translate');
    }
    expect(polls).toEqual([1_000, 3_000, 8_000, 20_000, 45_000]);
    expect(pacing.nextPollAt('translate')).toBeUndefined();
    expect(pacing.delaysOf(successor)).toEqual([40_000]);
  });

  it('after a few runs, polls around the learned delay: the first poll just after the shortest seen', () => {
    const clock = new ManualClock(0);
    const pacing = new SuccessorPacing(clock);
    for (const delay of [40_000, 42_000, 44_000]) {
      pacing.reported(successor, 'r');
      expect(pacing.arrived('translate', clock.now() + delay, 'r')).toBe(true);
      clock.set(clock.now() + 3_600_000);
    }
    const reportedAt = clock.now();
    pacing.reported(successor, 'r4');
    // Today's burst would poll at 1, 3, 8, 20 and 45 s: the learned delays skip the first four.
    expect(pacing.nextPollAt('translate')! - reportedAt).toBe(40_500);
    clock.set(reportedAt + 40_500);
    pacing.polled('translate');
    expect(pacing.nextPollAt('translate')! - reportedAt).toBeLessThanOrEqual(44_500);
  });

  it('gives the step up to the idle polls once the window passed unarrived', () => {
    const clock = new ManualClock(0);
    const pacing = new SuccessorPacing(clock, { burstMs: [1_000, 5_000] });
    pacing.reported(successor, 'r');
    clock.set(1_000);
    pacing.polled('translate');
    clock.set(5_000);
    pacing.polled('translate');
    expect(pacing.nextPollAt('translate')).toBeUndefined();
    expect(pacing.awaitedTasks()).toEqual([]);
    expect(pacing.arrived('translate', 9_000, 'r')).toBe(false);
  });

  it("matches a hit to its job run: another job's first step neither ends the wait nor teaches a delay", () => {
    const clock = new ManualClock(0);
    const pacing = new SuccessorPacing(clock);
    pacing.reported(successor, 'job-enrich');
    clock.set(8_000);
    // translate is also the first step of another job: its execution, created 5 s after our report.
    expect(pacing.arrived('translate', 5_000, 'job-other')).toBe(false);
    expect(pacing.delaysOf(successor)).toEqual([]);
    expect(pacing.nextPollAt('translate')).toBe(DEFAULT_BURST_MS[0]);
    clock.set(45_000);
    expect(pacing.arrived('translate', 40_000, 'job-enrich')).toBe(true);
    expect(pacing.delaysOf(successor)).toEqual([40_000]);
    expect(jobIdOf({ input: { context: { jobId: 'job-enrich' }, sku: 1 } })).toBe('job-enrich');
    expect(jobIdOf({ input: { context: { jobId: 7 } } })).toBeUndefined();
  });

  it('forecasts the polls it brings about at the rate so far, for the idle pace to leave them', () => {
    const clock = new ManualClock(0);
    const pacing = new SuccessorPacing(clock, { burstMs: [1_000, 5_000] });
    expect(pacing.expectedPolls(3_600_000)).toBe(0);
    pacing.reported(successor, 'r');
    clock.set(1_000);
    pacing.polled('translate');
    // An idle poll between the pacing's instants is not one of its polls.
    clock.set(2_000);
    pacing.polled('translate');
    clock.set(5_000);
    pacing.polled('translate');
    // Two polls in the first hour (the rate is read over an hour at least): 48 in the next day.
    expect(pacing.expectedPolls(24 * 3_600_000)).toBe(48);
  });

  it('keeps the learned delays across a restart', () => {
    const clock = new ManualClock(0);
    const before = new SuccessorPacing(clock);
    before.reported(successor, 'r');
    before.arrived('translate', 41_000, 'r');
    const after = new SuccessorPacing(clock);
    after.restore(JSON.parse(JSON.stringify(before.snapshot())));
    after.restore({ delaysMs: { broken: ['x'] } });
    expect(after.delaysOf(successor)).toEqual([41_000]);
    expect(after.snapshot().delaysMs).not.toHaveProperty('broken');
  });
});
