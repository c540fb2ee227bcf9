// Sample work for `df-worker demo`: realistic inputs for the example handlers (a few deliberately bad, so
// validation failures show too), and placeholder inputs for any other handler found in the folder.
import type { JsonObject } from '../api/types.ts';
import type { TaskModule } from '../handlers/define-task.ts';

export interface DemoInput {
  taskKey: string;
  input: JsonObject;
}

const PRODUCTS: JsonObject[] = [
  { sku: 'TS-0042', title: '  Organic cotton T-shirt — navy ', price: '24.90', currency: 'eur' },
  { sku: 'MUG-7', title: 'Stoneware mug (350 ml)', price: 12, currency: 'USD' },
  { sku: 'LAMP-3', title: 'Desk lamp, brass', price: '1,299.90', currency: 'SEK' },
  { sku: 'BAD-1', title: 'Gift card', price: 50, currency: 'XXX' }, // unknown currency: fails, not retried
  { sku: 'NOPRICE', title: 'Missing price', currency: 'EUR' }, // missing input key: fails before the handler
];

const CSVS: JsonObject[] = [
  { csv: 'sku,qty,warehouse\nTS-0042,12,PAR\nMUG-7,3,"LYS, dock 2"\n' },
  { csv: 'name;email\n"Doe; Jane";jane@example.com\n', delimiter: ';' },
  { csv: 'a,b\n"unterminated,2\n' }, // bad CSV: fails with the line number
];

/**
 * The execution fed at this index (the fifth) lacks the last input key its task declares, whatever the handlers:
 * `--executions 9` shows that failure (FAILED at once, naming the key, the handler never called) beside the
 * example handlers' bad-data failures.
 */
export const MISSING_KEY_AT = 4;

/** The i-th sample input for one of the handlers, cycling through tasks so every one gets work. */
export function demoInput(i: number, handlers: TaskModule[], webhookUrl: string): DemoInput {
  const sample = sampleInput(i, handlers, webhookUrl);
  const handler = handlers[i % handlers.length]!;
  const dropped = handler.inputKeys.at(-1)?.key;
  if (i !== MISSING_KEY_AT || dropped === undefined) return sample;
  const { [dropped]: _left, ...input } = sample.input;
  return { taskKey: sample.taskKey, input };
}

function sampleInput(i: number, handlers: TaskModule[], webhookUrl: string): DemoInput {
  const handler = handlers[i % handlers.length]!;
  const n = Math.floor(i / handlers.length);
  switch (handler.key) {
    case 'enrich-product':
      return { taskKey: handler.key, input: PRODUCTS[n % PRODUCTS.length]! };
    case 'csv-to-records':
      return { taskKey: handler.key, input: CSVS[n % CSVS.length]! };
    case 'notify-webhook':
      return {
        taskKey: handler.key,
        input: { webhookUrl, message: `Job step ${n + 1} finished: ${(n + 1) * 120} products enriched` },
      };
    default:
      return {
        taskKey: handler.key,
        input: Object.fromEntries(handler.inputKeys.map((k) => [k.key, `demo ${k.key} ${n + 1}`])),
      };
  }
}
