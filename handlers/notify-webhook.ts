// Example handler: POSTs a JSON summary to a webhook. Shows the retry contract: a server error or a network failure
// is thrown as is (the runner retries it), a rejection by the webhook (4xx) is a NonRetryableError.
import { defineTask, NonRetryableError } from 'df-worker';

type Input = { webhookUrl: unknown; message: unknown };
type Output = { delivered: true; status: number };

/** 408 and 429 are the 4xx answers that mean "try again later", so they are retried like a 5xx. */
const RETRYABLE_CLIENT_STATUSES = new Set([408, 429]);
const BODY_EXCERPT_LENGTH = 200;

export default defineTask<Input, Output>({
  key: 'notify-webhook',
  description: 'Posts a JSON notification to a webhook URL',
  retryCount: 2,
  timeoutMs: 10_000,
  inputKeys: [
    { key: 'webhookUrl', description: 'http(s) URL that accepts a JSON POST' },
    { key: 'message', description: 'Text of the notification' },
  ],
  outputKeys: [
    { key: 'delivered', description: 'Always true: an undelivered notification fails the execution' },
    { key: 'status', description: 'HTTP status the webhook answered' },
  ],
  async handle(input, ctx) {
    const url = parseWebhookUrl(input.webhookUrl);
    if (typeof input.message !== 'string') throw new NonRetryableError('input "message" must be a string');

    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        message: input.message,
        taskKey: ctx.task.key,
        executionId: ctx.execution.id,
        jobId: ctx.job.jobId ?? null,
        attempt: ctx.attempt,
      }),
      signal: ctx.signal,
    });
    // Read the body either way: it frees the connection, and a rejection's reason is usually in it.
    const body = await response.text();
    if (response.ok) return { delivered: true, status: response.status };

    // Only the origin is quoted: webhook paths and queries often embed a secret token.
    const answer = `webhook at ${url.origin} answered ${response.status} ${response.statusText}: ${excerpt(body)}`;
    if (response.status >= 500 || RETRYABLE_CLIENT_STATUSES.has(response.status)) throw new Error(answer);
    throw new NonRetryableError(`${answer}; check the webhook URL and what it accepts`);
  },
});

function parseWebhookUrl(value: unknown): URL {
  if (typeof value !== 'string' || !URL.canParse(value)) {
    throw new NonRetryableError('input "webhookUrl" must be an absolute http(s) URL');
  }
  const url = new URL(value);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new NonRetryableError(`input "webhookUrl" must use http or https, not ${url.protocol}`);
  }
  return url;
}

function excerpt(body: string): string {
  const text = body.replace(/\s+/g, ' ').trim();
  if (text === '') return '(empty body)';
  return text.length > BODY_EXCERPT_LENGTH ? `${text.slice(0, BODY_EXCERPT_LENGTH)}…` : text;
}
