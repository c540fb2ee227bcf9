// `npm run docs`: rewrites the generated tables of the guides (configuration in config/README.md, metrics in
// helm/README.md, error codes in src/errors/README.md) from the code, and their figure blocks from
// bench/figures.json.
import { readFile, writeFile } from 'node:fs/promises';
import { GENERATED_DOCS } from './reference.ts';

for (const doc of GENERATED_DOCS) {
  const file = new URL(`../../${doc.path}`, import.meta.url);
  const before = await readFile(file, 'utf8');
  const after = doc.render(before);
  if (after !== before) {
    await writeFile(file, after);
    process.stdout.write(`${doc.path}: generated tables and figures updated\n`);
  } else {
    process.stdout.write(`${doc.path}: generated tables and figures already up to date\n`);
  }
}
