// The kinds of setting the schema is written in: a leaf (`Setting`) and the helpers that build one with its
// format, bounds and documentation (the accepted values and the default appended to its text).
import { describeBounds, FORMAT, MAX_TIMER_MS } from './formats.ts';
import type { FormatBounds } from './formats.ts';

/** A leaf of the schema; `T` is the type of the loaded value. */
export interface Setting<T> extends FormatBounds {
  default: T;
  /** The environment variable that sets it. */
  env: string;
  doc: string;
  /** One of FORMAT: how text is coerced and which values are valid (see formats.ts). */
  format: string;
  /** Never shown in messages, logs or `check` (the API key, the wake token). */
  sensitive?: boolean;
}

interface SettingText<T> {
  env: string;
  default: T;
  /** What the setting does, with its unit; the helpers append the accepted values and the default. */
  doc: string;
}

export function withDefault(doc: string, accepted: string, value: unknown): string {
  return `${doc} ${accepted}. Default: ${JSON.stringify(value)}.`;
}

export function integer(text: SettingText<number> & { min: number; max?: number }): Setting<number> {
  const bounds: FormatBounds = text.max === undefined ? { min: text.min } : { min: text.min, max: text.max };
  return {
    ...bounds,
    env: text.env,
    default: text.default,
    format: FORMAT.integer,
    doc: withDefault(text.doc, describeBounds('integer', bounds), text.default),
  };
}

/** A delay in milliseconds; capped where Node's timers stop working. */
export function milliseconds(text: SettingText<number> & { min: number }): Setting<number> {
  return integer({ ...text, max: MAX_TIMER_MS });
}

export function number(text: SettingText<number> & { min: number; max: number }): Setting<number> {
  return {
    min: text.min,
    max: text.max,
    env: text.env,
    default: text.default,
    format: FORMAT.number,
    doc: withDefault(text.doc, describeBounds('number', text), text.default),
  };
}

export function flag(text: SettingText<boolean>): Setting<boolean> {
  return {
    env: text.env,
    default: text.default,
    format: FORMAT.boolean,
    doc: withDefault(text.doc, 'true or false (also 1/0, yes/no, on/off)', text.default),
  };
}

export function flagOrAuto(text: SettingText<boolean | 'auto'>): Setting<boolean | 'auto'> {
  return {
    env: text.env,
    default: text.default,
    format: FORMAT.booleanOrAuto,
    doc: withDefault(text.doc, 'auto, true or false (also 1/0, yes/no, on/off)', text.default),
  };
}

export function string(
  text: SettingText<string> & { sensitive?: boolean; nonEmpty?: boolean },
): Setting<string> {
  return {
    env: text.env,
    default: text.default,
    format: FORMAT.string,
    sensitive: text.sensitive === true,
    nonEmpty: text.nonEmpty === true,
    doc: withDefault(text.doc, text.nonEmpty === true ? 'A non-empty string' : 'A string', text.default),
  };
}

export function oneOf<const V extends readonly [string, ...string[]]>(
  text: SettingText<V[number]> & { values: V },
): Setting<V[number]> {
  return {
    values: text.values,
    env: text.env,
    default: text.default,
    format: FORMAT.oneOf,
    doc: withDefault(text.doc, `One of ${text.values.join(', ')}`, text.default),
  };
}
