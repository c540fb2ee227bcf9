// `npm run docs`: rewrites README.md's generated tables (configuration, metrics) from the code.
import { readFile, writeFile } from 'node:fs/promises';
import { renderReadme } from './reference.ts';

const file = new URL('../../README.md', import.meta.url);
const before = await readFile(file, 'utf8');
const after = renderReadme(before);
if (after !== before) {
  await writeFile(file, after);
  process.stdout.write('README.md: generated tables updated\n');
} else {
  process.stdout.write('README.md: generated tables already up to date\n');
}
