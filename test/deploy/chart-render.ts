// Renders the chart's templates as `helm template` would, without a helm binary: a Go-template interpreter for the
// subset of actions and of Helm's and Sprig's functions that the chart uses. Anything outside that subset throws,
// naming it, so a new construct in a template cannot be skipped silently. Values are merged over values.yaml as Helm
// merges them; values.schema.json is not applied here (the chart tests check it with ajv).
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml, parseAllDocuments, stringify as stringifyYaml } from 'yaml';

export const CHART_DIR = fileURLToPath(new URL('../../helm/df-worker', import.meta.url));

/** A template's `fail` action: the message Helm would print, and stop on. */
export class ChartFailure extends Error {
  override name = 'ChartFailure';
}

/** A construct this renderer does not know: extend it, or keep the template within the subset. */
export class UnsupportedTemplateError extends Error {
  override name = 'UnsupportedTemplateError';
}

export type Values = Record<string, unknown>;

function isObject(value: unknown): value is Values {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Helm's merge of a user values file over the chart's defaults: maps merge, null deletes, the rest replaces. */
export function coalesce(defaults: Values, overrides: Values): Values {
  const merged: Values = { ...defaults };
  for (const [key, value] of Object.entries(overrides)) {
    if (value === null) delete merged[key];
    else if (isObject(value) && isObject(merged[key])) merged[key] = coalesce(merged[key], value);
    else merged[key] = value;
  }
  return merged;
}

// ---- Lexing and parsing -------------------------------------------------------------------------------------------

type Token =
  | { kind: 'string'; value: string }
  | { kind: 'number'; value: number }
  | { kind: 'word'; value: string } // a function name, true, false, nil
  | { kind: 'field'; value: string[] } // .A.B, or [] for the dot
  | { kind: 'variable'; name: string; fields: string[] } // $x.A
  | { kind: 'punct'; value: '(' | ')' | '|' | ':=' | '=' | ',' };

type Operand =
  | { kind: 'literal'; value: unknown }
  | { kind: 'function'; name: string }
  | { kind: 'field'; path: string[] }
  | { kind: 'variable'; name: string; path: string[] }
  | { kind: 'pipeline'; pipeline: Pipeline };

interface Pipeline {
  declare?: { names: string[]; op: ':=' | '=' };
  commands: Operand[][];
}

type Node =
  | { kind: 'text'; text: string }
  | { kind: 'action'; pipeline: Pipeline }
  | { kind: 'if' | 'with'; pipeline: Pipeline; then: Node[]; otherwise: Node[] }
  | { kind: 'range'; pipeline: Pipeline; body: Node[] };

function tokenize(source: string, where: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < source.length) {
    const rest = source.slice(i);
    const space = /^\s+/.exec(rest);
    if (space) {
      i += space[0].length;
      continue;
    }
    let match: RegExpExecArray | null;
    if ((match = /^"((?:[^"\\]|\\.)*)"/.exec(rest))) {
      tokens.push({ kind: 'string', value: JSON.parse(match[0]) as string });
    } else if ((match = /^`([^`]*)`/.exec(rest))) {
      tokens.push({ kind: 'string', value: match[1]! });
    } else if ((match = /^-?\d+(\.\d+)?/.exec(rest))) {
      tokens.push({ kind: 'number', value: Number(match[0]) });
    } else if ((match = /^\$(\w*)((?:\.\w+)*)/.exec(rest))) {
      tokens.push({ kind: 'variable', name: match[1]!, fields: match[2]!.split('.').slice(1) });
    } else if ((match = /^\.((?:\w+)(?:\.\w+)*)?/.exec(rest))) {
      tokens.push({ kind: 'field', value: match[1] === undefined ? [] : match[1].split('.') });
    } else if ((match = /^(:=|[()|=,])/.exec(rest))) {
      tokens.push({ kind: 'punct', value: match[1] as '(' });
    } else if ((match = /^\w+/.exec(rest))) {
      tokens.push({ kind: 'word', value: match[0] });
    } else {
      throw new UnsupportedTemplateError(`${where}: cannot read the action at "${rest.slice(0, 40)}"`);
    }
    i += match[0].length;
  }
  return tokens;
}

function parsePipeline(tokens: Token[], where: string): Pipeline {
  let position = 0;
  const peek = () => tokens[position];
  function pipeline(): Pipeline {
    const result: Pipeline = { commands: [] };
    // `$a := ...`, `$a = ...` or `$i, $v := ...`
    const names: string[] = [];
    let look = position;
    while (tokens[look]?.kind === 'variable') {
      names.push((tokens[look] as { name: string }).name);
      const next = tokens[look + 1];
      if (next?.kind === 'punct' && next.value === ',') look += 2;
      else break;
    }
    const op = tokens[look + 1];
    if (names.length > 0 && op?.kind === 'punct' && (op.value === ':=' || op.value === '=')) {
      result.declare = { names, op: op.value };
      position = look + 2;
    }
    let command: Operand[] = [];
    for (;;) {
      const token = peek();
      if (token === undefined || (token.kind === 'punct' && token.value === ')')) break;
      position += 1;
      if (token.kind === 'punct' && token.value === '|') {
        result.commands.push(command);
        command = [];
      } else if (token.kind === 'punct' && token.value === '(') {
        command.push({ kind: 'pipeline', pipeline: pipeline() });
        const close = peek();
        if (close?.kind !== 'punct' || close.value !== ')')
          throw new UnsupportedTemplateError(`${where}: no )`);
        position += 1;
      } else if (token.kind === 'string' || token.kind === 'number') {
        command.push({ kind: 'literal', value: token.value });
      } else if (token.kind === 'word') {
        if (token.value === 'true' || token.value === 'false')
          command.push({ kind: 'literal', value: token.value === 'true' });
        else if (token.value === 'nil') command.push({ kind: 'literal', value: undefined });
        else command.push({ kind: 'function', name: token.value });
      } else if (token.kind === 'field') {
        command.push({ kind: 'field', path: token.value });
      } else if (token.kind === 'variable') {
        command.push({ kind: 'variable', name: token.name, path: token.fields });
      } else {
        throw new UnsupportedTemplateError(`${where}: unexpected "${token.value}"`);
      }
    }
    result.commands.push(command);
    return result;
  }
  const parsed = pipeline();
  if (position !== tokens.length) throw new UnsupportedTemplateError(`${where}: unexpected )`);
  return parsed;
}

/** Splits a template into text and the bodies of its actions, applying the `{{-` and `-}}` whitespace trims. */
function scan(source: string, where: string): ({ text: string } | { action: string })[] {
  const parts: ({ text: string } | { action: string })[] = [];
  let i = 0;
  let trimNext = false;
  while (i < source.length) {
    const open = source.indexOf('{{', i);
    let text = source.slice(i, open < 0 ? source.length : open);
    if (trimNext) text = text.replace(/^\s+/, '');
    if (open < 0) {
      parts.push({ text });
      break;
    }
    const trimBefore = /^\{\{- /.test(source.slice(open));
    if (trimBefore) text = text.replace(/\s+$/, '');
    parts.push({ text });
    // The action ends at the first }} outside a string or a comment.
    let j = open + (trimBefore ? 3 : 2);
    let end = -1;
    while (j < source.length) {
      const c = source[j]!;
      if (source.startsWith('}}', j)) {
        end = j;
        break;
      }
      let next = j + 1;
      if (source.startsWith('/*', j)) next = source.indexOf('*/', j) + 2;
      else if (c === '`') next = source.indexOf('`', j + 1) + 1;
      else if (c === '"') {
        next = j + 1;
        while (next < source.length && source[next] !== '"') next += source[next] === '\\' ? 2 : 1;
        next += 1;
      }
      if (next <= j) break;
      j = next;
    }
    if (end < 0) throw new UnsupportedTemplateError(`${where}: an action opened at ${open} is never closed`);
    trimNext = source[end - 1] === '-' && source[end - 2] === ' ';
    const body = source.slice(open + (trimBefore ? 3 : 2), trimNext ? end - 2 : end).trim();
    parts.push({ action: body });
    i = end + 2;
  }
  return parts;
}

interface Parsed {
  nodes: Node[];
  defines: Map<string, Node[]>;
}

function parseTemplate(source: string, where: string): Parsed {
  const parts = scan(source, where);
  const defines = new Map<string, Node[]>();
  let index = 0;
  // Parses nodes up to an `end` or `else` at this level; returns which one stopped it.
  function block(): { nodes: Node[]; stop?: string } {
    const nodes: Node[] = [];
    while (index < parts.length) {
      const part = parts[index++]!;
      if ('text' in part) {
        if (part.text !== '') nodes.push({ kind: 'text', text: part.text });
        continue;
      }
      const body = part.action;
      if (body.startsWith('/*')) continue;
      const keyword = /^(if|with|range|define|end|else)\b\s*/.exec(body);
      if (keyword === null) {
        nodes.push({ kind: 'action', pipeline: parsePipeline(tokenize(body, where), where) });
        continue;
      }
      const rest = body.slice(keyword[0].length);
      switch (keyword[1]) {
        case 'end':
          return { nodes, stop: 'end' };
        case 'else':
          return { nodes, stop: rest === '' ? 'else' : `else ${rest}` };
        case 'define': {
          const name = JSON.parse(rest) as string;
          const inner = block();
          if (inner.stop !== 'end')
            throw new UnsupportedTemplateError(`${where}: define "${name}" not closed`);
          defines.set(name, inner.nodes);
          break;
        }
        case 'range': {
          const inner = block();
          if (inner.stop !== 'end') throw new UnsupportedTemplateError(`${where}: range with else or no end`);
          nodes.push({
            kind: 'range',
            pipeline: parsePipeline(tokenize(rest, where), where),
            body: inner.nodes,
          });
          break;
        }
        default:
          nodes.push(conditional(keyword[1] as 'if' | 'with', rest));
      }
    }
    return { nodes };
  }
  function conditional(kind: 'if' | 'with', condition: string): Node {
    const pipeline = parsePipeline(tokenize(condition, where), where);
    const then = block();
    let otherwise: Node[] = [];
    if (then.stop === 'else') {
      const inner = block();
      if (inner.stop !== 'end') throw new UnsupportedTemplateError(`${where}: ${kind} without end`);
      otherwise = inner.nodes;
    } else if (then.stop?.startsWith('else ')) {
      const chained = /^else (if|with)\s+([\s\S]*)$/.exec(then.stop);
      if (chained === null) throw new UnsupportedTemplateError(`${where}: {{ ${then.stop} }}`);
      // `else if` shares the outer `end`, which the nested conditional consumes.
      otherwise = [conditional(chained[1] as 'if' | 'with', chained[2]!)];
    } else if (then.stop !== 'end') throw new UnsupportedTemplateError(`${where}: ${kind} without end`);
    return { kind, pipeline, then: then.nodes, otherwise };
  }
  const top = block();
  if (top.stop !== undefined)
    throw new UnsupportedTemplateError(`${where}: {{ ${top.stop} }} without its block`);
  return { nodes: top.nodes, defines };
}

// ---- Evaluation ---------------------------------------------------------------------------------------------------

function truthy(value: unknown): boolean {
  if (value === undefined || value === null || value === false || value === 0 || value === '') return false;
  if (Array.isArray(value)) return value.length > 0;
  if (isObject(value)) return Object.keys(value).length > 0;
  return true;
}

/** Go's fmt %v of a value, as an action prints it; a missing value prints as nothing, as in Helm. */
function show(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  throw new UnsupportedTemplateError(
    `printing a ${Array.isArray(value) ? 'list' : 'map'} with {{ }}: use toYaml`,
  );
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (!isObject(value)) return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((key) => [key, sortKeys(value[key])]),
  );
}

function toInt(value: unknown): number {
  const number = typeof value === 'string' ? Number.parseInt(value, 10) : Number(value ?? 0);
  return Number.isFinite(number) ? Math.trunc(number) : 0;
}

/** Go's printf for the verbs the chart uses. */
function goPrintf(format: string, args: unknown[]): string {
  let next = 0;
  return format.replace(/%([sdqv%])/g, (_, verb: string) => {
    if (verb === '%') return '%';
    const arg = args[next++];
    if (verb === 'q') return JSON.stringify(show(arg));
    if (verb === 'd') return String(toInt(arg));
    return show(arg);
  });
}

type Scope = Map<string, unknown>[];

class Renderer {
  private readonly templates = new Map<string, Node[]>();
  private readonly files: Map<string, string>;

  constructor(files: Map<string, string>) {
    this.files = files;
    for (const [name, source] of files) {
      if (!name.startsWith('templates/')) continue;
      const parsed = parseTemplate(source, name);
      this.templates.set(`df-worker/${name}`, parsed.nodes);
      for (const [defined, nodes] of parsed.defines) this.templates.set(defined, nodes);
    }
  }

  execute(name: string, dot: unknown): string {
    const nodes = this.templates.get(name);
    if (nodes === undefined) throw new UnsupportedTemplateError(`no template named "${name}"`);
    return this.nodes(nodes, dot, [new Map([['', dot]])]);
  }

  private nodes(nodes: Node[], dot: unknown, scope: Scope): string {
    let out = '';
    for (const node of nodes) {
      switch (node.kind) {
        case 'text':
          out += node.text;
          break;
        case 'action': {
          const value = this.pipeline(node.pipeline, dot, scope);
          if (node.pipeline.declare === undefined) out += show(value);
          break;
        }
        case 'if':
        case 'with': {
          const inner: Scope = [...scope, new Map<string, unknown>()];
          const value = this.pipeline(node.pipeline, dot, inner);
          if (truthy(value)) out += this.nodes(node.then, node.kind === 'with' ? value : dot, inner);
          else out += this.nodes(node.otherwise, dot, [...scope, new Map<string, unknown>()]);
          break;
        }
        case 'range': {
          const inner: Scope = [...scope, new Map<string, unknown>()];
          const value = this.pipeline({ ...node.pipeline, declare: undefined }, dot, inner);
          const entries: [unknown, unknown][] = Array.isArray(value)
            ? value.map((item, i) => [i, item])
            : isObject(value)
              ? Object.keys(value)
                  .sort()
                  .map((key) => [key, value[key]])
              : [];
          const names = node.pipeline.declare?.names ?? [];
          for (const [key, item] of entries) {
            const frame = new Map<string, unknown>();
            if (names.length === 1) frame.set(names[0]!, item);
            if (names.length === 2) frame.set(names[0]!, key).set(names[1]!, item);
            out += this.nodes(node.body, item, [...inner, frame]);
          }
          break;
        }
      }
    }
    return out;
  }

  private pipeline(pipeline: Pipeline, dot: unknown, scope: Scope): unknown {
    let value: unknown;
    pipeline.commands.forEach((command, i) => {
      value = this.command(command, dot, scope, i === 0 ? [] : [value]);
    });
    const declare = pipeline.declare;
    if (declare !== undefined) {
      const name = declare.names[0]!;
      if (declare.op === ':=') scope[scope.length - 1]!.set(name, value);
      else {
        const frame = [...scope].reverse().find((candidate) => candidate.has(name));
        if (frame === undefined)
          throw new UnsupportedTemplateError(`$${name} assigned before it is declared`);
        frame.set(name, value);
      }
    }
    return value;
  }

  private command(command: Operand[], dot: unknown, scope: Scope, piped: unknown[]): unknown {
    const [head, ...rest] = command;
    if (head === undefined) throw new UnsupportedTemplateError('an empty command');
    if (head.kind === 'function') {
      const args = () => [...rest.map((operand) => this.operand(operand, dot, scope)), ...piped];
      // and/or stop at the first operand that decides, as Go's do.
      if (head.name === 'and' || head.name === 'or') {
        let last: unknown;
        for (const operand of rest) {
          last = this.operand(operand, dot, scope);
          if (truthy(last) === (head.name === 'or')) return last;
        }
        return piped.length > 0 ? piped[0] : last;
      }
      return this.call(head.name, args());
    }
    const value = this.operand(head, dot, scope);
    if (typeof value === 'function') {
      return (value as (...args: unknown[]) => unknown)(
        ...rest.map((operand) => this.operand(operand, dot, scope)),
        ...piped,
      );
    }
    if (rest.length > 0 || piped.length > 0)
      throw new UnsupportedTemplateError('arguments given to a non-function');
    return value;
  }

  private operand(operand: Operand, dot: unknown, scope: Scope): unknown {
    switch (operand.kind) {
      case 'literal':
        return operand.value;
      case 'function':
        return this.call(operand.name, []);
      case 'pipeline':
        return this.pipeline(operand.pipeline, dot, scope);
      case 'field':
        return walk(dot, operand.path);
      case 'variable': {
        const frame = [...scope].reverse().find((candidate) => candidate.has(operand.name));
        if (frame === undefined) throw new UnsupportedTemplateError(`$${operand.name} is not declared`);
        return walk(frame.get(operand.name), operand.path);
      }
    }
  }

  private call(name: string, args: unknown[]): unknown {
    const text = (i: number) => show(args[i]);
    const numbers = () => args.map(toInt);
    switch (name) {
      case 'include':
        return this.execute(text(0), args[1]);
      case 'fail':
        throw new ChartFailure(text(0));
      case 'printf':
        return goPrintf(text(0), args.slice(1));
      case 'print':
        return args.map(show).join('');
      case 'quote':
        return args.map((arg) => JSON.stringify(show(arg))).join(' ');
      case 'join': {
        // Sprig's join: the list's items as text, separated by the first argument.
        const list = args[1];
        if (!Array.isArray(list)) throw new UnsupportedTemplateError('join of something not a list');
        return list.map(show).join(text(0));
      }
      case 'toYaml': {
        if (args[0] === undefined || args[0] === null) return 'null';
        return stringifyYaml(sortKeys(args[0]), { lineWidth: 0 }).replace(/\n$/, '');
      }
      case 'toPrettyJson':
        return JSON.stringify(sortKeys(args[0]), null, 2);
      case 'nindent':
      case 'indent': {
        const pad = ' '.repeat(toInt(args[0]));
        const indented = pad + text(1).replaceAll('\n', `\n${pad}`);
        return name === 'nindent' ? `\n${indented}` : indented;
      }
      case 'default':
        return truthy(args[1]) ? args[1] : args[0];
      case 'empty':
        return !truthy(args[0]);
      case 'trunc':
        return text(1).slice(0, toInt(args[0]));
      case 'trimSuffix':
        return text(1).endsWith(text(0)) ? text(1).slice(0, text(1).length - text(0).length) : text(1);
      case 'contains':
        return text(1).includes(text(0));
      case 'replace':
        return text(2).replaceAll(text(0), text(1));
      case 'lower':
        return text(0).toLowerCase();
      case 'sha256sum':
        return createHash('sha256').update(text(0)).digest('hex');
      case 'b64enc':
        return Buffer.from(text(0)).toString('base64');
      case 'toString':
        return show(args[0]);
      case 'int':
        return toInt(args[0]);
      case 'add':
        return numbers().reduce((a, b) => a + b, 0);
      case 'mul':
        return numbers().reduce((a, b) => a * b, 1);
      case 'div':
        return Math.trunc(toInt(args[0]) / toInt(args[1]));
      case 'max':
        return Math.max(...numbers());
      case 'not':
        return !truthy(args[0]);
      case 'eq':
        return args.slice(1).some((other) => other === args[0]);
      case 'ne':
        return args[0] !== args[1];
      case 'gt':
        return toInt(args[0]) > toInt(args[1]);
      case 'ge':
        return toInt(args[0]) >= toInt(args[1]);
      case 'lt':
        return toInt(args[0]) < toInt(args[1]);
      case 'le':
        return toInt(args[0]) <= toInt(args[1]);
      case 'len':
        return Array.isArray(args[0]) || typeof args[0] === 'string'
          ? args[0].length
          : Object.keys(args[0] ?? {}).length;
      case 'list':
        return args;
      case 'has':
        return Array.isArray(args[1]) && args[1].includes(args[0]);
      case 'hasKey':
        return isObject(args[0]) && text(1) in args[0];
      case 'dig': {
        const map = args[args.length - 1];
        const fallback = args[args.length - 2];
        const keys = args.slice(0, -2).map(show);
        const found = walk(map, keys);
        return found === undefined ? fallback : found;
      }
      default:
        throw new UnsupportedTemplateError(`the function "${name}" is not in the subset this renderer knows`);
    }
  }

  file(name: string): string {
    return this.files.get(name) ?? '';
  }
}

function walk(value: unknown, fields: string[]): unknown {
  let node = value;
  for (const field of fields) {
    if (!isObject(node)) return undefined;
    node = node[field];
  }
  return node;
}

// ---- The chart ----------------------------------------------------------------------------------------------------

function chartFiles(): Map<string, string> {
  const files = new Map<string, string>();
  for (const folder of ['templates', 'dashboards']) {
    for (const name of readdirSync(path.join(CHART_DIR, folder)).sort()) {
      files.set(`${folder}/${name}`, readFileSync(path.join(CHART_DIR, folder, name), 'utf8'));
    }
  }
  return files;
}

/** values.yaml of the chart. */
export function chartDefaults(): Values {
  return parseYaml(readFileSync(path.join(CHART_DIR, 'values.yaml'), 'utf8')) as Values;
}

export interface Release {
  name?: string;
  namespace?: string;
}

/** What a template's dot holds at its top: Values, Release, Chart, Template and Files. */
function topDot(renderer: Renderer, values: Values, release: Release): Values {
  const chart = parseYaml(readFileSync(path.join(CHART_DIR, 'Chart.yaml'), 'utf8')) as Values;
  return {
    Values: coalesce(chartDefaults(), values),
    Release: {
      Name: release.name ?? 'df-worker',
      Namespace: release.namespace ?? 'default',
      Service: 'Helm',
    },
    Chart: { Name: chart.name, Version: chart.version, AppVersion: chart.appVersion },
    Template: { BasePath: 'df-worker/templates' },
    Files: { Get: (name: unknown) => renderer.file(show(name)) },
  };
}

/**
 * The chart rendered for `values` (merged over values.yaml): each template file's output by file name, without
 * the empty ones, the helpers and NOTES.txt. Throws a ChartFailure where a template's `fail` would stop Helm.
 */
export function renderChart(values: Values = {}, release: Release = {}): Map<string, string> {
  const files = chartFiles();
  const renderer = new Renderer(files);
  const dot = topDot(renderer, values, release);
  const rendered = new Map<string, string>();
  for (const name of files.keys()) {
    const base = path.basename(name);
    if (!name.startsWith('templates/') || base.startsWith('_') || base === 'NOTES.txt') continue;
    const text = renderer.execute(`df-worker/${name}`, dot);
    if (text.trim() !== '') rendered.set(base, text);
  }
  return rendered;
}

/** One template's text rendered with `dot`, alone (it may include only what it defines itself). */
export function renderTemplate(source: string, dot: unknown): string {
  return new Renderer(new Map([['templates/inline.yaml', source]])).execute(
    'df-worker/templates/inline.yaml',
    dot,
  );
}

/** NOTES.txt rendered for `values`, as `helm install` prints it. */
export function renderNotes(values: Values = {}, release: Release = {}): string {
  const renderer = new Renderer(chartFiles());
  return renderer.execute('df-worker/templates/NOTES.txt', topDot(renderer, values, release));
}

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [field: string]: unknown;
}

/** The Kubernetes objects the chart renders for `values`, parsed; throws on YAML that does not parse. */
export function renderManifests(values: Values = {}, release: Release = {}): Manifest[] {
  const manifests: Manifest[] = [];
  for (const [name, text] of renderChart(values, release)) {
    for (const document of parseAllDocuments(text)) {
      if (document.errors.length > 0)
        throw new Error(`${name} renders invalid YAML: ${document.errors[0]!.message}`);
      const object = document.toJS() as Manifest | null;
      if (object !== null) manifests.push(object);
    }
  }
  return manifests;
}
