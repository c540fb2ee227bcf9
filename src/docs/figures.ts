// Measured costs the guides quote (a handler worker's memory, its first attempt): the benchmarks write them to
// bench/figures.json, and `npm run docs` copies them into the guides' figure blocks, so no two guides can differ.
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import os from 'node:os';

/** One measured figure, as a benchmark wrote it. */
export interface Figure {
  /** Its name in bench/figures.json and in the guides' blocks, ending in its unit (`-mb`, `-ms`). */
  name: string;
  value: number;
  unit: 'MB' | 'ms';
  /** What was measured, in a user's words. */
  meaning: string;
  /** The command that measured it. */
  command: string;
}

interface StoredFigure extends Omit<Figure, 'name'> {
  /** The day it was measured (UTC), and on what. */
  measuredOn: string;
  machine: string;
}

export const FIGURES_FILE = new URL('../../bench/figures.json', import.meta.url);

/** A figure block in a guide: `<!-- figure:NAME -->` then the figure as quoted, then `<!-- /figure -->`. */
export const FIGURE_BLOCK = /<!-- figure:([a-z0-9-]+) -->([\s\S]*?)<!-- \/figure -->/g;

export function readFigures(): Record<string, StoredFigure> {
  const stored = JSON.parse(readFileSync(FIGURES_FILE, 'utf8')) as {
    figures: Record<string, StoredFigure>;
  };
  return stored.figures;
}

/** Adds or replaces figures in bench/figures.json, keeping the others; returns the file's path. */
export async function writeFigures(figures: Figure[]): Promise<string> {
  let current: Record<string, StoredFigure> = {};
  try {
    current = readFigures();
  } catch {
    // No file yet: start one.
  }
  const machine = `${os.platform()} ${os.arch()}, ${os.availableParallelism()} cores, Node ${process.version}`;
  const measuredOn = new Date().toISOString().slice(0, 10);
  for (const { name, value, ...figure } of figures) {
    current[name] = { value: Math.round(value * 1000) / 1000, ...figure, measuredOn, machine };
  }
  const sorted = Object.fromEntries(Object.entries(current).sort(([a], [b]) => a.localeCompare(b)));
  const text = {
    about:
      'Written by the benchmarks (each entry names its command); the guides quote these figures through `npm run docs`. Do not edit by hand: run the command again.',
    figures: sorted,
  };
  await writeFile(FIGURES_FILE, `${JSON.stringify(text, null, 2)}\n`);
  return 'bench/figures.json';
}

/** A figure as the guides quote it: whole MB; milliseconds as seconds from 100 ms up. */
export function quoteFigure(figure: Pick<Figure, 'value' | 'unit'>): string {
  if (figure.unit === 'MB') return `${Math.round(figure.value)} MB`;
  return figure.value >= 100 ? `${(figure.value / 1000).toFixed(1)} s` : `${figure.value.toFixed(2)} ms`;
}

/** Rewrites every figure block of a guide from bench/figures.json; throws on a name the file does not hold. */
export function renderFigures(text: string, figures = readFigures()): string {
  return text.replace(FIGURE_BLOCK, (_, name: string) => {
    const figure = figures[name];
    if (figure === undefined) throw new Error(`no figure "${name}" in bench/figures.json`);
    return `<!-- figure:${name} -->${quoteFigure(figure)}<!-- /figure -->`;
  });
}
