// The chart renderer against what Go's text/template and Helm do, on the constructs the chart's templates use.
import { describe, expect, it } from 'vitest';
import { ChartFailure, renderTemplate, UnsupportedTemplateError } from './chart-render.ts';

describe('renderTemplate', () => {
  it('trims whitespace at {{- and -}}, and drops comments', () => {
    expect(renderTemplate('a  \n  {{- "b" -}}  \n c {{/* note */}}d', {})).toBe('abc d');
    expect(renderTemplate('{{- /* role */ -}}\nkind: x', {})).toBe('kind: x');
  });

  it('chains else if under one end, and scopes with to its value', () => {
    const template =
      '{{ if .a }}A{{ else if .b }}B{{ else }}C{{ end }}{{ with .m }}{{ .k }}{{ else }}-{{ end }}';
    expect(renderTemplate(template, { a: 1, m: { k: 'K' } })).toBe('AK');
    expect(renderTemplate(template, { b: true, m: {} })).toBe('B-');
    expect(renderTemplate(template, { a: '', b: [] })).toBe('C-');
  });

  it('declares and assigns variables, with $ as the top dot inside range and with', () => {
    const template =
      '{{ $n := 0 }}{{ range .items }}{{ $n = add $n . }}{{ end }}{{ $n }} {{ with .x }}{{ $.y }}{{ end }}';
    expect(renderTemplate(template, { items: [1, 2, 3], x: true, y: 'top' })).toBe('6 top');
  });

  it('keeps raw strings whole, braces included, and quotes them as Go does', () => {
    expect(renderTemplate('s: {{ `{{ $labels.pod }} is "down"` | quote }}', {})).toBe(
      's: "{{ $labels.pod }} is \\"down\\""',
    );
  });

  it('pipes the previous value as the last argument, and stops and/or at the deciding operand', () => {
    expect(renderTemplate('{{ "abcdef-" | trunc 4 | trimSuffix "d" | printf "%d/%s" 7 }}', {})).toBe('7/abc');
    expect(renderTemplate('{{ and 0 (fail "evaluated") }}|{{ or "x" (fail "evaluated") }}', {})).toBe('0|x');
    expect(renderTemplate('{{ default "d" .missing }} {{ .set | default "d" }}', { set: 's' })).toBe('d s');
  });

  it('indents toYaml under nindent, with map keys sorted as Helm does', () => {
    expect(renderTemplate('spec:{{ toYaml .v | nindent 2 }}', { v: { b: 1, a: [{ z: 1, y: 2 }] } })).toBe(
      'spec:\n  a:\n    - y: 2\n      z: 1\n  b: 1',
    );
  });

  it('stops on fail with its message, and on what it does not know, naming it', () => {
    expect(() => renderTemplate('{{ fail "replicaCount is 2" }}', {})).toThrow(
      new ChartFailure('replicaCount is 2'),
    );
    expect(() => renderTemplate('{{ required "x" .a }}', {})).toThrow(UnsupportedTemplateError);
    expect(() => renderTemplate('{{ required "x" .a }}', {})).toThrow(/"required"/);
    expect(() => renderTemplate('{{ if .a }}never closed', {})).toThrow(UnsupportedTemplateError);
  });
});
