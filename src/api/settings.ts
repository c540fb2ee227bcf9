// The DF_* settings the daemon fills the client's options from: error messages name these, since they are what a
// user changes (test/api/settings.test.ts checks each against the configuration schema). A client built by hand
// may name its own with the `urlSetting` and `timeoutSettings` options.
/**
 * Which limit passed: connecting, waiting for the headers once the request was written, silence between body
 * chunks, the deadline from sending to the headers, or the deadline of the whole answer (`answer`).
 */
export type TimeoutPhase = 'connect' | 'headers' | 'body' | 'request' | 'answer';

/** The setting holding the service's base URL (the client's `baseUrl`). */
export const URL_SETTING = 'DF_API_URL';

/** The setting of each time limit, by the phase it bounds (the client's `connectTimeoutMs`, ...). */
export const TIMEOUT_SETTINGS: Readonly<Record<TimeoutPhase, string>> = {
  connect: 'DF_API_CONNECT_TIMEOUT_MS',
  headers: 'DF_API_HEADERS_TIMEOUT_MS',
  body: 'DF_API_BODY_TIMEOUT_MS',
  request: 'DF_API_REQUEST_TIMEOUT_MS',
  answer: 'DF_API_ANSWER_TIMEOUT_MS',
};
