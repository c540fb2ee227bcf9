// Events go out one way (issue 37): a part emits on the one emitter itself, rather than taking a callback that
// its wiring binds to `events.emit`. Read from src/'s syntax trees: a function passed as an argument or an
// option whose whole body is one `.emit(` call is such a translation, whatever its names and layout.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../cli/process.ts';

const SRC = join(REPO_ROOT, 'src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** The expression under parentheses, `void`, `as` and `!`. */
function bare(node: ts.Expression): ts.Expression {
  let inner = node;
  while (
    ts.isParenthesizedExpression(inner) ||
    ts.isVoidExpression(inner) ||
    ts.isAsExpression(inner) ||
    ts.isNonNullExpression(inner) ||
    ts.isSatisfiesExpression(inner)
  )
    inner = inner.expression;
  return inner;
}

/** The one expression a function's body is, or undefined when it does more (or nothing). */
function soleExpression(fn: ts.ArrowFunction | ts.FunctionExpression): ts.Expression | undefined {
  if (!ts.isBlock(fn.body)) return fn.body;
  if (fn.body.statements.length !== 1) return undefined;
  const [statement] = fn.body.statements;
  if (statement && ts.isExpressionStatement(statement)) return statement.expression;
  if (statement && ts.isReturnStatement(statement)) return statement.expression;
  return undefined;
}

function isEmitCall(node: ts.Expression): boolean {
  const call = bare(node);
  if (!ts.isCallExpression(call)) return false;
  const callee = bare(call.expression);
  return ts.isPropertyAccessExpression(callee) && callee.name.text === 'emit';
}

/** Whether `fn` is handed to someone: an argument of a call or `new`, or the value of an option. */
function isHandedOver(fn: ts.Node): boolean {
  let node = fn;
  while (ts.isParenthesizedExpression(node.parent) || ts.isAsExpression(node.parent)) node = node.parent;
  const parent = node.parent;
  if (ts.isCallExpression(parent) || ts.isNewExpression(parent))
    return parent.arguments?.some((argument) => argument === node) ?? false;
  return ts.isPropertyAssignment(parent) && parent.initializer === node;
}

/** Every callback in `text` that only emits an event, as `file:line: its text`. */
function emitOnlyCallbacks(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isArrowFunction(node) || ts.isFunctionExpression(node)) && isHandedOver(node)) {
      const body = soleExpression(node);
      if (body !== undefined && isEmitCall(body)) {
        const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
        found.push(`${file}:${line}: ${node.getText(source).replace(/\s+/g, ' ')}`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

describe("src/'s parts", () => {
  it('emit on the emitter themselves: no callback only translates into an event', () => {
    const files = sourceFiles(SRC);
    // The reading works: it reads the whole tree, the emitter's own file among it.
    expect(files.length).toBeGreaterThan(100);
    expect(files).toContain(join(SRC, 'events', 'worker-events.ts'));
    const found = files.flatMap((file) =>
      emitOnlyCallbacks(relative(REPO_ROOT, file), readFileSync(file, 'utf8')),
    );
    expect(found).toEqual([]);
  });

  it('finds a callback that only emits, however it is written (the check itself)', () => {
    const text = [
      "const client = clientFromConfig(config, gate, (e) => events.emit('response', e));",
      "const link = new RedisLink(config, (kind) =>\n  events.emit('redisError', { kind }),\n);",
      "const budget = new Budget({ onPause: (pause) => { this.events?.emit('rateLimited', pause); } });",
      "watch(path, function (read) { return (events as WorkerEvents).emit('apiKeyFile', read); });",
      // Not translations: a callback that does more, an emit that is not handed over, a listener that logs.
      "const keys = new ApiKeyFile({ onRead: (r) => { events.emit('apiKeyFile', r); this.#log(r); } });",
      "const tell = (e) => events.emit('response', e);",
      "events.on('response', (e) => logger.info(e));",
    ].join('\n');
    expect(emitOnlyCallbacks('sample.ts', text)).toEqual([
      "sample.ts:1: (e) => events.emit('response', e)",
      "sample.ts:2: (kind) => events.emit('redisError', { kind })",
      "sample.ts:5: (pause) => { this.events?.emit('rateLimited', pause); }",
      "sample.ts:6: function (read) { return (events as WorkerEvents).emit('apiKeyFile', read); }",
    ]);
  });
});
