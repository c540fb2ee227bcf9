// Whether a key can be sent at all: an HTTP client refuses to put anything but visible ASCII in a header
// (node:http throws on every request, which would look like a network outage); anything else in a key is a
// copy-paste accident. Read at start (config/checks.ts) and at each read of DF_API_KEY_FILE (api-key-file.ts).
const VISIBLE_ASCII = /^[\x21-\x7E]$/;

/** 1-based position and code point of the first character a header cannot carry, if any. */
function firstUnsendable(key: string): { position: number; codePoint: string } | undefined {
  const characters = [...key];
  const index = characters.findIndex((character) => !VISIBLE_ASCII.test(character));
  if (index < 0) return undefined;
  const codePoint = characters[index]!.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0');
  return { position: index + 1, codePoint: `U+${codePoint}` };
}

/** Why the key cannot be sent, never quoting it (`path`: the key file it came from), or undefined. */
export function keyShapeProblem(key: string, path?: string): string | undefined {
  const subject = path === undefined ? 'the key' : `the key file ${path}`;
  if (key === '') return `${subject} is empty; write the API key into it`;
  const unsendable = firstUnsendable(key);
  if (unsendable === undefined) return undefined;
  return (
    `${subject} contains a character that is not visible ASCII (${unsendable.codePoint}) at position ${unsendable.position}, ` +
    'which a request header cannot carry (often a space, a zero-width space or a smart quote from copy-paste); ' +
    'copy the key again as plain text'
  );
}
