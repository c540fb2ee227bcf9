// Tests for the notify-webhook example against a real HTTP server on the loopback interface, run through
// runTaskLocally so retries follow the same rules as in the daemon.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { runTaskLocally } from 'df-worker';
import notifyWebhook from './notify-webhook.ts';

/** Answers queued per test, in order; each request records its parsed JSON body. */
let answers: Array<{ status: number; body: string }> = [];
let received: unknown[] = [];
let server: Server;
let baseUrl: string;

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

beforeAll(async () => {
  server = createServer((request, response) => {
    void readBody(request).then((body) => {
      received.push(JSON.parse(body));
      const answer = answers.shift() ?? { status: 200, body: 'ok' };
      response.writeHead(answer.status, { 'content-type': 'text/plain' }).end(answer.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  answers = [];
  received = [];
});

// No waiting between attempts: the retry logic is what is under test, not the delay.
const noBackoff = { baseMs: 0, maxMs: 0 };

describe('notify-webhook', () => {
  it('posts the message with the job context and reports the status', async () => {
    const outcome = await runTaskLocally(notifyWebhook, {
      webhookUrl: `${baseUrl}/hooks/orders`,
      message: 'Import finished: 120 products',
      context: { jobId: 'job-9' },
    });
    expect(outcome).toMatchObject({
      status: 'COMPLETED',
      attempts: 1,
      output: { delivered: true, status: 200 },
    });
    expect(received).toEqual([
      {
        message: 'Import finished: 120 products',
        taskKey: 'notify-webhook',
        executionId: expect.stringMatching(/^local-/) as unknown,
        jobId: 'job-9',
        attempt: 1,
      },
    ]);
  });

  it('retries after a 5xx answer and completes when the webhook recovers', async () => {
    answers = [{ status: 500, body: 'database is down' }];
    const outcome = await runTaskLocally(
      notifyWebhook,
      { webhookUrl: `${baseUrl}/hooks`, message: 'hello' },
      { retryCount: 1, backoff: noBackoff },
    );
    expect(outcome).toMatchObject({
      status: 'COMPLETED',
      attempts: 2,
      output: { delivered: true, status: 200 },
    });
    expect(received).toHaveLength(2);
  });

  it('reports the last 5xx answer once the retries are used up', async () => {
    answers = [
      { status: 503, body: 'busy' },
      { status: 502, body: 'bad gateway' },
    ];
    const outcome = await runTaskLocally(
      notifyWebhook,
      { webhookUrl: `${baseUrl}/hooks?token=secret`, message: 'hello' },
      { retryCount: 1, backoff: noBackoff },
    );
    expect(outcome).toMatchObject({ status: 'FAILED', attempts: 2, failure: { kind: 'handler' } });
    expect(outcome.output.error).toBe(`webhook at ${baseUrl} answered 502 Bad Gateway: bad gateway`);
  });

  it('fails without retrying on a 4xx answer', async () => {
    answers = [{ status: 404, body: 'no such hook' }];
    const outcome = await runTaskLocally(
      notifyWebhook,
      { webhookUrl: `${baseUrl}/missing`, message: 'hello' },
      { backoff: noBackoff },
    );
    expect(outcome).toMatchObject({
      status: 'FAILED',
      attempts: 1,
      output: { errorName: 'NonRetryableError' },
    });
    expect(outcome.output.error).toMatch(/answered 404 Not Found: no such hook; check the webhook URL/);
    expect(received).toHaveLength(1);
  });

  it('fails without retrying on a URL that is not http(s)', async () => {
    const outcome = await runTaskLocally(notifyWebhook, { webhookUrl: 'ftp://example.com/x', message: 'hi' });
    expect(outcome).toMatchObject({
      status: 'FAILED',
      attempts: 1,
      output: { errorName: 'NonRetryableError' },
    });
    expect(received).toEqual([]);
  });
});
