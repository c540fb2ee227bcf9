// What `df-worker demo` prints for each reported execution: its outcome, with the input it was given and the output
// the service recorded, each as one line of compact JSON, so a reader sees which input led to which outcome.
import { splitInput } from '../runner/input.ts';

/** Longest input and output shown, in characters; longer ones end in `…`. */
export const INPUT_PREVIEW_CHARS = 80;
export const OUTPUT_PREVIEW_CHARS = 120;

export interface ReportedExecution {
  id: string;
  taskKey: string;
  /** The execution's input as the service holds it (with the job `context` it adds, which is left out here). */
  input: unknown;
  status: string;
  output: unknown;
  /** From its creation to the service recording its report, when known. */
  tookMs?: number;
}

/** `✖ <id> enrich-product FAILED in 1.2 s  input {...}  → {"error":...}` */
export function outcomeLine(execution: ReportedExecution): string {
  const mark = execution.status === 'COMPLETED' ? '✔' : '✖';
  const took = execution.tookMs === undefined ? '' : ` in ${(execution.tookMs / 1000).toFixed(1)} s`;
  const input = compactJson(splitInput(execution.input).input, INPUT_PREVIEW_CHARS);
  const output = compactJson(execution.output, OUTPUT_PREVIEW_CHARS);
  return `${mark} ${execution.id} ${execution.taskKey} ${execution.status}${took}  input ${input}  → ${output}`;
}

/** One line of JSON (newlines in strings stay escaped), cut to `maxChars` with a closing `…`. */
export function compactJson(value: unknown, maxChars: number): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > maxChars ? `${text.slice(0, maxChars - 1)}…` : text;
}
