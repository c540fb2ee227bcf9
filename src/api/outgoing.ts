// What the client checks and encodes before a request leaves, so a bad argument fails without a request (and
// without spending the budget): the base URL, a page size, the bodies of a report, a task and a variable, an
// upload's Blob.
import { isPlainObject } from '../schema/plain-object.ts';
import { ReportValidationError } from './errors.ts';
import type { ExecutionReport, FileUpload } from './client-options.ts';
import type { TaskDefinition, VariableUpdate } from './types.ts';

/** The service's largest page of a list. */
export const MAX_PAGE_SIZE = 1000;

/** `baseUrl` as a URL; throws a TypeError naming `urlSetting` when it is not an http(s) URL without secrets. */
export function parseBaseUrl(baseUrl: string, urlSetting: string): URL {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw new TypeError(
      `${urlSetting} ${JSON.stringify(baseUrl)} is not a URL; expected e.g. https://api.example.com`,
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new TypeError(`${urlSetting} must use http or https, got ${url.protocol}`);
  }
  if (url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') {
    throw new TypeError(
      `${urlSetting} must not carry a query, fragment or credentials; set the API key and its auth mode instead`,
    );
  }
  return url;
}

export function checkPageSize(size: number): void {
  if (!Number.isInteger(size) || size < 1 || size > MAX_PAGE_SIZE) {
    throw new RangeError(
      `page size must be an integer from 1 to ${MAX_PAGE_SIZE} (the service's maximum), got ${size}`,
    );
  }
}

/** The PATCH body of a report; a ReportValidationError, nothing sent, for one the service would refuse. */
export function serializeReport(id: string, report: ExecutionReport): string {
  const status: unknown = report.status;
  if (status !== 'COMPLETED' && status !== 'FAILED') {
    throw new ReportValidationError(
      `report for execution ${id} has status ${JSON.stringify(status) ?? String(status)}; ` +
        `only COMPLETED or FAILED may be reported. Nothing was sent`,
    );
  }
  const output: unknown = report.output;
  if (!isPlainObject(output)) {
    const kind = Array.isArray(output) ? 'an array' : output === null ? 'null' : typeof output;
    throw new ReportValidationError(
      `report for execution ${id} has output of type ${kind}; output must be a plain object (use {} for none). ` +
        `Nothing was sent`,
    );
  }
  try {
    return JSON.stringify({ id, status, output });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new ReportValidationError(
      `report for execution ${id} has output that cannot be serialized as JSON (${reason}). Nothing was sent`,
      { cause: error },
    );
  }
}

/** A task's create or update body: its extra fields as read, then the definition's members (which win). */
export function serializeTask(definition: TaskDefinition, id?: string): string {
  const { key, description, retryCount, inputKeys, outputKeys, extraFields } = definition;
  const members = { key, description, retryCount, inputKeys, outputKeys };
  return JSON.stringify(
    id === undefined ? { ...extraFields, ...members } : { ...extraFields, ...members, id },
  );
}

/** A variable's PUT body: every member the service replaces, its status ACTIVE unless the update says. */
export function serializeVariable(id: string, update: VariableUpdate): string {
  const { key, name, value, secret, status = 'ACTIVE' } = update;
  return JSON.stringify({ id, key, name, value, secret, status });
}

/** The upload as a Blob of its content type. */
export function toBlob(file: FileUpload): Blob {
  if (file.data instanceof Blob) {
    return file.contentType === undefined ? file.data : new Blob([file.data], { type: file.contentType });
  }
  // Copied into a fresh ArrayBuffer-backed view: Blob does not accept views over a SharedArrayBuffer.
  return new Blob([new Uint8Array(file.data)], { type: file.contentType ?? 'application/octet-stream' });
}
