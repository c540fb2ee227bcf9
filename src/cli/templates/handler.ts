// The text `df-worker new` writes: a starter handler module and its vitest file, in erasable TypeScript or
// plain ESM JavaScript. The generated test must pass as written, so it shares the sample below with our tests.
import type { ModuleScope } from '../../handlers/module-scope.ts';

export type HandlerLanguage = 'ts' | 'js';

/** Input the generated test feeds the generated handler, and the output the handler returns for it. */
export const SAMPLE_INPUT = { text: 'hello' } as const;
export const SAMPLE_OUTPUT = { result: 'HELLO' } as const;

/** Extension of the handler module (and, before `.test`, of its test) for a language and module scope. */
export function handlerExtension(
  language: HandlerLanguage,
  scope: ModuleScope = 'module',
): '.ts' | '.mts' | '.mjs' {
  if (language === 'js') return '.mjs';
  return scope === 'module' ? '.ts' : '.mts';
}

/** The handler module for `key`; `key` must already be a valid file-name key (see `new`). */
export function handlerSource(key: string, language: HandlerLanguage): string {
  const types =
    language === 'ts'
      ? `
// Declare input and output with \`type\` aliases (an interface is not accepted as a JSON object).
type Input = { text: unknown };
type Output = { result: string };
`
      : '';
  const define = language === 'ts' ? 'defineTask<Input, Output>' : 'defineTask';
  return `// Handler of the "${key}" custom task. Edit inputKeys, outputKeys and handle(): the worker checks that every
// declared input key is present before handle() runs and that every declared output key is returned.
import { defineTask, NonRetryableError } from 'df-worker';
${types}
export default ${define}({
  key: '${key}',
  description: 'TODO: what this task does, shown in the service UI',
  // Attempts after a failed one (a NonRetryableError is never retried).
  retryCount: 0,
  inputKeys: [{ key: 'text', description: 'TODO: describe this input' }],
  outputKeys: [{ key: 'result', description: 'TODO: describe this output' }],
  handle(input, ctx) {
    // Input comes from the service as JSON: check it, and fail for good when retrying cannot help.
    if (typeof input.text !== 'string') throw new NonRetryableError('input "text" must be a string');
    ctx.logger.debug({ length: input.text.length }, 'transforming the text');
    // For I/O, make handle async and pass ctx.signal to fetch() so a timeout or a shutdown stops it.
    return { result: input.text.toUpperCase() };
  },
});
`;
}

/** The vitest file next to the handler: one COMPLETED run and one run FAILED for a missing input key. */
export function handlerTestSource(
  key: string,
  language: HandlerLanguage,
  scope: ModuleScope = 'module',
): string {
  return `// Tests of the "${key}" handler through runTaskLocally: the input and output checks the worker applies.
import { describe, expect, it } from 'vitest';
import { runTaskLocally } from 'df-worker';
import task from './${key}${handlerExtension(language, scope)}';

describe('${key}', () => {
  it('completes with the declared output keys', async () => {
    const outcome = await runTaskLocally(task, ${objectLiteral(SAMPLE_INPUT)});
    expect(outcome).toMatchObject({ status: 'COMPLETED', output: ${objectLiteral(SAMPLE_OUTPUT)} });
  });

  it('fails without calling the handler when a declared input key is missing', async () => {
    const outcome = await runTaskLocally(task, {});
    expect(outcome).toMatchObject({ status: 'FAILED', attempts: 0, output: { missingInputKeys: ['text'] } });
  });
});
`;
}

/** A flat object of strings as Prettier would print it: `{ text: 'hello' }`. */
function objectLiteral(value: Readonly<Record<string, string>>): string {
  const members = Object.entries(value).map(([name, text]) => `${name}: '${text}'`);
  return `{ ${members.join(', ')} }`;
}
