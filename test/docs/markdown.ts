// Reading Markdown as GitHub renders it, for the link tests: prose outside code, links with their line, and the
// anchors a file offers.
/** The text outside fenced code blocks, line by line (code blocks become empty lines, so line numbers hold). */
export function proseLines(markdown: string): string[] {
  let fence: string | undefined;
  return markdown.split('\n').map((line) => {
    const marker = /^\s*(```+|~~~+)/.exec(line)?.[1];
    if (marker !== undefined && (fence === undefined || marker.startsWith(fence))) {
      fence = fence === undefined ? marker : undefined;
      return '';
    }
    return fence === undefined ? line : '';
  });
}

/** GitHub's anchor for a heading: its text as rendered, lower-cased, punctuation but `-` and `_` dropped, spaces as `-`. */
export function githubSlug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .replace(/`/g, '');
  return text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
    .replace(/ /g, '-');
}

/** Every anchor a Markdown file offers: heading slugs (repeats numbered -1, -2... as GitHub does) and explicit ids. */
export function anchors(markdown: string): Set<string> {
  const found = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of proseLines(markdown)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading !== undefined) {
      const slug = githubSlug(heading);
      const count = seen.get(slug) ?? 0;
      seen.set(slug, count + 1);
      found.add(count === 0 ? slug : `${slug}-${count}`);
    }
    for (const match of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) found.add(match[1]!);
  }
  return found;
}

export interface Link {
  file: string;
  line: number;
  target: string;
}

export function links(file: string, markdown: string): Link[] {
  const found: Link[] = [];
  proseLines(markdown).forEach((text, index) => {
    const prose = text.replace(/`[^`]*`/g, (code) => ' '.repeat(code.length));
    for (const match of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      found.push({ file, line: index + 1, target: match[1]! });
    }
  });
  return found;
}

/** Where the package's docs point for files that do not ship: the repository's main branch on GitHub. */
export const REPOSITORY_URL = 'https://github.com/df-worker/df-worker';

/**
 * The repository path an absolute link into this repository names (`.../blob/main/helm/README.md#x` gives
 * `helm/README.md#x`; an image's `raw.githubusercontent.com/.../main/handlers/x.png` gives `handlers/x.png`), or
 * undefined for any other URL.
 */
export function repositoryPath(target: string): string | undefined {
  const prefix =
    /^https:\/\/(?:github\.com\/df-worker\/df-worker\/(?:blob|tree)\/main|raw\.githubusercontent\.com\/df-worker\/df-worker\/main)\//;
  return prefix.test(target) ? target.replace(prefix, '') : undefined;
}
