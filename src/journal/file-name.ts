// Maps an execution id (any string the service chooses) to a safe file name inside one folder, so an id
// such as "../x" or "a/b" can never escape the journal folder or collide with another id.

// Not an ESM import: its namespace would read node:crypto's lazy webcrypto (see telemetry/http-server.ts).
const { createHash } = process.getBuiltinModule('node:crypto');

const READABLE_ID = /^[A-Za-z0-9_-]+$/;
/** Stays well under the 255-byte limit of common file systems once ".json" and temp suffixes are added. */
const MAX_NAME_LENGTH = 180;

/**
 * File name (without extension) for an execution id. Ids made of [A-Za-z0-9_-] are kept as they are; any
 * other character becomes %XX per UTF-8 byte, so the name is reversible (see executionIdFromFileName) and
 * never contains '.', '/' or '\'. Names that would be too long become a readable prefix plus a SHA-256
 * of the id after a '~' (a character the encoding never produces); the record still carries the real id.
 */
export function fileNameForExecution(executionId: string): string {
  if (executionId.length === 0) throw new TypeError('an execution id must be a non-empty string');
  // Lone surrogates have no UTF-8 form: hash their JSON spelling, which keeps them distinct.
  if (!executionId.isWellFormed()) return `~${sha256(JSON.stringify(executionId))}`;
  const name = READABLE_ID.test(executionId) ? executionId : percentEncode(executionId);
  if (name.length <= MAX_NAME_LENGTH) return name;
  const digest = sha256(executionId);
  return `${name.slice(0, MAX_NAME_LENGTH - digest.length - 1).replace(/%[0-9A-F]?$/, '')}~${digest}`;
}

/** The execution id a file name stands for, or undefined for a hashed (too long) or foreign name. */
export function executionIdFromFileName(name: string): string | undefined {
  if (name.length === 0 || !/^(?:[A-Za-z0-9_-]|%[0-9A-F]{2})+$/.test(name)) return undefined;
  try {
    return decodeURIComponent(name);
  } catch {
    return undefined;
  }
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function percentEncode(id: string): string {
  let encoded = '';
  for (const byte of new TextEncoder().encode(id)) {
    const char = String.fromCharCode(byte);
    encoded +=
      byte < 0x80 && READABLE_ID.test(char) ? char : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return encoded;
}
