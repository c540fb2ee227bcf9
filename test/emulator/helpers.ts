// Loopback helpers for the emulator tests: start one per test and speak plain HTTP to it with fetch.
import { expect } from 'vitest';
import { Emulator } from '../../src/emulator/index.ts';
import type { EmulatorOptions } from '../../src/emulator/index.ts';

export const KEY = 'emulator-key';

export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  json: unknown;
}

export interface CallOptions {
  /** API key sent as X-Api-Key; null sends none. */
  key?: string | null;
  body?: unknown;
  headers?: Record<string, string>;
}

export async function startEmulator(options?: EmulatorOptions): Promise<Emulator> {
  const emulator = new Emulator(options);
  await emulator.listen();
  return emulator;
}

export async function call(
  emulator: Emulator,
  method: string,
  path: string,
  options: CallOptions = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...options.headers };
  const key = options.key === undefined ? KEY : options.key;
  if (key !== null) headers['x-api-key'] = key;
  let body: string | undefined;
  if (options.body !== undefined) {
    body = typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const response = await fetch(emulator.url + path, { method, headers, body });
  const text = await response.text();
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, text, json };
}

/** Shape of the service's error envelope (part 7) with the given status and code. */
export function envelope(status: number, code: string): Record<string, unknown> {
  return { date: anyString, code, message: anyString, httpStatusCode: status };
}

/** Asymmetric matchers typed as unknown, so object literals holding them stay free of `any`. */
export const anyString: unknown = expect.any(String);
export const anyNumber: unknown = expect.any(Number);
