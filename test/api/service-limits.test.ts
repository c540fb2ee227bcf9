// The service's published limits live in src/api/service-limits.ts alone: the settings' defaults and the
// emulator's read them there, no other file in src/ writes them out, and the guides quote the same figures.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  MAX_UPLOAD_BYTES,
  SERVICE_REQUEST_LIMITS,
  SERVICE_REQUEST_LIMITS_TEXT,
} from '../../src/api/service-limits.ts';
import { listSettings } from '../../src/config/schema.ts';
import { DEFAULT_LIMITS } from '../../src/emulator/limits.ts';
import { REPO_ROOT } from '../cli/run-cli.ts';

const defaultOf = (env: string) => listSettings().find(({ entry }) => entry.env === env)?.entry.default;

describe("the service's published limits", () => {
  it("are the budget settings' defaults and the emulator's", () => {
    expect(SERVICE_REQUEST_LIMITS).toEqual({ perSecond: 5, perMinute: 50, perMonth: 40_000 });
    expect(defaultOf('DF_BUDGET_PER_SECOND')).toBe(SERVICE_REQUEST_LIMITS.perSecond);
    expect(defaultOf('DF_BUDGET_PER_MINUTE')).toBe(SERVICE_REQUEST_LIMITS.perMinute);
    expect(defaultOf('DF_BUDGET_PER_MONTH')).toBe(SERVICE_REQUEST_LIMITS.perMonth);
    expect(DEFAULT_LIMITS).toEqual(SERVICE_REQUEST_LIMITS);
    expect(SERVICE_REQUEST_LIMITS_TEXT).toBe('5/s, 50/min, 40,000/month');
  });

  it('are written out nowhere else in src/', async () => {
    const dir = path.join(REPO_ROOT, 'src');
    const entries = await readdir(dir, { withFileTypes: true, recursive: true });
    const strays: string[] = [];
    for (const entry of entries.filter((e) => e.isFile() && e.name.endsWith('.ts'))) {
      const file = path.join(entry.parentPath, entry.name);
      if (file === path.join(dir, 'api', 'service-limits.ts')) continue;
      const text = await readFile(file, 'utf8');
      for (const [index, line] of text.split('\n').entries()) {
        if (
          /\b40_?000\b(?!\s*times)|100 \* 1024 \* 1024|(PER_SECOND|perSecond:?) =? ?5\b|(PER_MINUTE|perMinute:?) =? ?50\b/.test(
            line,
          )
        ) {
          strays.push(`${path.relative(REPO_ROOT, file)}:${index + 1}: ${line.trim()}`);
        }
      }
    }
    expect(strays).toEqual([]);
  });

  it('are the figures the guides quote', async () => {
    const readme = await readFile(path.join(REPO_ROOT, 'README.md'), 'utf8');
    expect(readme).toContain(`${SERVICE_REQUEST_LIMITS.perMonth.toLocaleString('en-US')}/month`);
    const handlers = await readFile(path.join(REPO_ROOT, 'handlers/README.md'), 'utf8');
    expect(handlers).toContain(`at most ${MAX_UPLOAD_BYTES / 1024 / 1024} MB (100 × 1024 × 1024 bytes)`);
  });
});
