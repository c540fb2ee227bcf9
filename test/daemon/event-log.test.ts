// The log lines that say what the core's events tell are written by one listener (src/daemon/event-log.ts),
// from the events alone: the same lines in standalone and clustered mode, and no part writes them beside.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { logEvents } from '../../src/daemon/event-log.ts';
import { WorkerEvents } from '../../src/events/worker-events.ts';
import { REPO_ROOT } from '../cli/process.ts';

type Line = Record<string, unknown> & { msg: string; level: number };

function listening(): { events: WorkerEvents; lines: Line[] } {
  const lines: Line[] = [];
  const sink = new Writable({
    write: (chunk: Buffer, _encoding, done) => {
      lines.push(JSON.parse(chunk.toString()) as Line);
      done();
    },
  });
  // Payloads frozen as in development builds: the listener reads them and writes none.
  const events = new WorkerEvents({ freezePayloads: true });
  logEvents(events, pino(sink));
  return { events, lines };
}

const ref = { task: 'enrich', executionId: 'e-1' };
const outcome = { status: 'COMPLETED', output: {}, attempts: 1, durationMs: 12 } as const;

describe('the event log', () => {
  it("writes an execution's lines from its events: claimed, finished, report retried, reported", () => {
    const { events, lines } = listening();
    events.emit('claim', { ...ref, resumed: false, createdAt: '2026-12-02T00:00:00.000Z' });
    events.emit('outcome', { ...ref, outcome });
    events.emit('reportRetry', {
      ...ref,
      attempt: 1,
      retryInMs: 250,
      rateLimited: false,
      error: { name: 'NetworkError', message: 'socket hang up' },
    });
    // A 429's retry is the budget's pause, logged once for every request it holds: no line per report.
    events.emit('reportRetry', {
      ...ref,
      attempt: 2,
      retryInMs: 0,
      rateLimited: true,
      error: { name: 'ServiceError', message: '429' },
    });
    events.emit('report', { ...ref, status: 'COMPLETED', result: 'delivered', attempts: 3 });

    expect(lines.map((l) => l.msg)).toEqual([
      'execution claimed',
      'execution finished',
      'report failed; retrying',
      'execution reported',
    ]);
    for (const line of lines) expect(line).toMatchObject({ taskKey: 'enrich', executionId: 'e-1' });
    expect(lines[1]).toMatchObject({ status: 'COMPLETED', attempts: 1, durationMs: 12 });
    expect(lines[2]).toMatchObject({
      level: 40,
      attempt: 1,
      retryInMs: 250,
      err: { type: 'NetworkError', message: 'socket hang up' },
    });
    expect(lines[3]).toMatchObject({ level: 30, status: 'COMPLETED', reportAttempts: 3 });
    expect(lines.some((l) => 'replay' in l)).toBe(false);
  });

  it('marks the lines of an execution taken up again, until its report ends', () => {
    const { events, lines } = listening();
    events.emit('claim', { ...ref, resumed: true });
    events.emit('outcome', { ...ref, outcome });
    events.emit('report', { ...ref, status: 'COMPLETED', result: 'left-in-journal', attempts: 1 });
    events.emit('claim', { ...ref, resumed: false });
    expect(lines.map((l) => [l.msg, l.replay])).toEqual([
      ['execution finished', true],
      ['report not delivered before exit; it stays in the journal for the next start', true],
      ['execution claimed', undefined],
    ]);
  });

  it('warns once of a redelivery, names the queue job that holds one, and tells a lost answer whole', () => {
    const { events, lines } = listening();
    events.emit('redelivered', { ...ref, where: 'pipeline', again: false });
    events.emit('redelivered', { ...ref, where: 'pipeline', again: true });
    events.emit('redelivered', { ...ref, where: 'queue', jobId: 'job-7' });
    events.emit('fenced', { request: 'report', ...ref });
    events.emit('fenced', { request: 'poll' });
    events.emit('pollAnswerLost', {
      task: 'enrich',
      taskId: 't-1',
      reason: 'timeout',
      polledAt: '2026-12-02T00:00:00.000Z',
      lostAt: '2026-12-02T00:00:30.000Z',
      error: {
        name: 'TimeoutError',
        message: 'no answer',
        code: 'DFW_API_TIMEOUT',
        phase: 'request',
        sent: true,
      },
    });
    expect(lines.map((l) => l.msg.slice(0, 40))).toEqual([
      'a poll handed out again an execution thi',
      'a poll handed out again an execution who',
      'this process no longer owns the executio',
      'poll answer lost after the poll was sent',
    ]);
    expect(lines[1]).toMatchObject({ jobId: 'job-7', executionId: 'e-1' });
    expect(lines[3]).toMatchObject({
      level: 50,
      taskKey: 'enrich',
      taskId: 't-1',
      reason: 'timeout',
      lostAt: '2026-12-02T00:00:30.000Z',
      err: { type: 'TimeoutError', code: 'DFW_API_TIMEOUT', phase: 'request', sent: true },
    });
  });

  it('is the only place in src/ that writes those lines', () => {
    // As written in the source: a whole message in quotes, or the quoted start of a long one.
    const messages = [
      "'execution claimed'",
      "'execution finished'",
      "'execution reported'",
      "'report failed; retrying'",
      "'report not delivered before exit; it stays in the journal for the next start'",
      "'a poll handed out again an execution",
      "'this process no longer owns the execution (its lock",
      "'poll answer lost after the poll was sent",
    ];
    const src = join(REPO_ROOT, 'src');
    const files = (readdirSync(src, { recursive: true }) as string[]).filter((f) => f.endsWith('.ts'));
    const writers = new Map<string, string[]>();
    for (const file of files) {
      const text = readFileSync(join(src, file), 'utf8');
      for (const message of messages) {
        if (text.includes(message))
          writers.set(message, [...(writers.get(message) ?? []), relative(REPO_ROOT, join(src, file))]);
      }
    }
    // The check reads what it means to: each message is found, in the listener alone.
    expect(Object.fromEntries(writers)).toEqual(
      Object.fromEntries(messages.map((m) => [m, ['src/daemon/event-log.ts']])),
    );
  });
});
