// One table of exit codes beside the error catalogue: every code distinct and documented in src/errors/README.md,
// and no exit code written as a bare number or a constant of its own anywhere else in src/.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { exitCodesTable } from '../../src/docs/reference.ts';
import { EXIT_CODES } from '../../src/errors/exit-codes.ts';
import { REPO_ROOT } from '../cli/run-cli.ts';

async function sourceFiles(): Promise<string[]> {
  const dir = path.join(REPO_ROOT, 'src');
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => path.join(entry.parentPath, entry.name));
}

describe('the exit codes table', () => {
  it('gives each code one name, EXIT_*, and a meaning of one line', () => {
    const codes = Object.values(EXIT_CODES).map((entry) => entry.code);
    expect(new Set(codes).size).toBe(codes.length);
    for (const [name, entry] of Object.entries(EXIT_CODES)) {
      expect(name).toMatch(/^EXIT_[A-Z]+(_[A-Z]+)*$/);
      expect(entry.code).toBeGreaterThanOrEqual(0);
      expect(entry.code).toBeLessThan(256);
      expect(entry.meaning).not.toContain('\n');
    }
    expect(EXIT_CODES.EXIT_CONFIG.code).toBe(78);
  });

  it('is documented: src/errors/README.md holds the generated table, a row for every code', async () => {
    const guide = await readFile(path.join(REPO_ROOT, 'src/errors/README.md'), 'utf8');
    expect(guide).toContain(exitCodesTable());
    for (const [name, entry] of Object.entries(EXIT_CODES)) {
      expect(guide).toContain(`| ${entry.code} | \`${name}\` |`);
    }
  });

  it('is the only place in src/ that defines an exit code', async () => {
    const strays: string[] = [];
    for (const file of await sourceFiles()) {
      const relative = path.relative(REPO_ROOT, file);
      if (relative === path.join('src', 'errors', 'exit-codes.ts')) continue;
      const text = await readFile(file, 'utf8');
      for (const [index, line] of text.split('\n').entries()) {
        // main.ts exits before it imports anything when Node is too old; that line says which code it writes.
        if (/process\.exit\(\d+\); \/\/ EXIT_[A-Z_]+ /.test(line)) continue;
        if (/\bexport const EXIT_[A-Z_]+ = \d|process\.exit\(\d|exitCode = \d/.test(line)) {
          strays.push(`${relative}:${index + 1}: ${line.trim()}`);
        }
      }
    }
    expect(strays).toEqual([]);
  });
});
