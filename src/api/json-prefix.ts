// Reads one member of a JSON object from the first bytes of its text, before the rest arrives (or after it
// was lost): a poll answer cut short may already name the execution it claimed.

/**
 * The value of the top-level string member `key` of the JSON object that `prefix` begins, if the prefix holds
 * it whole; undefined when it does not (not yet arrived, not a string, not an object, or not JSON).
 */
export function topLevelString(prefix: string, key: string): string | undefined {
  let depth = 0;
  // At depth 1: a member's name comes next, its value, or neither (inside a value that is not a string).
  let expecting: 'name' | 'value' | 'nothing' = 'nothing';
  let name: string | undefined;
  for (let i = 0; i < prefix.length; i++) {
    const c = prefix[i]!;
    if (c === '"') {
      const end = stringEnd(prefix, i);
      if (end === undefined) return undefined;
      if (depth === 1 && expecting !== 'nothing') {
        let text: string;
        try {
          text = JSON.parse(prefix.slice(i, end)) as string;
        } catch {
          return undefined;
        }
        if (expecting === 'name') {
          name = text;
          expecting = 'value';
        } else {
          if (name === key) return text;
          expecting = 'nothing';
        }
      }
      i = end - 1;
    } else if (c === '{' || c === '[') {
      if (depth === 0 && c !== '{') return undefined;
      depth++;
      if (depth === 1) expecting = 'name';
      else if (depth === 2) expecting = 'nothing';
    } else if (c === '}' || c === ']') {
      depth--;
      if (depth <= 0) return undefined;
    } else if (depth === 1 && c === ',') {
      expecting = 'name';
    } else if (depth === 0 && !/\s/.test(c)) {
      return undefined;
    } else if (depth === 1 && expecting === 'value' && c !== ':' && !/\s/.test(c)) {
      expecting = 'nothing'; // a number, true, false or null
    }
  }
  return undefined;
}

/** Index just past the string token opening at `start`, or undefined when it does not end within `text`. */
function stringEnd(text: string, start: number): number | undefined {
  for (let j = start + 1; j < text.length; j++) {
    if (text[j] === '\\') j++;
    else if (text[j] === '"') return j + 1;
  }
  return undefined;
}
