// Example handler: turns a raw product row into the fields a catalogue needs (URL slug, clean title, price in
// minor units). Pure and deterministic; bad data fails at once with NonRetryableError since a retry cannot fix it.
import { defineTask, NonRetryableError } from 'df-worker';

type Input = { sku: unknown; title: unknown; price: unknown; currency: unknown };
type Output = { slug: string; normalizedTitle: string; priceMinor: number; currency: string };

/** Digits after the decimal point per ISO 4217 code; a short list of what this catalogue sells in. */
const MINOR_UNIT_DIGITS: Readonly<Record<string, number>> = {
  AUD: 2,
  BHD: 3,
  CAD: 2,
  CHF: 2,
  CZK: 2,
  DKK: 2,
  EUR: 2,
  GBP: 2,
  JPY: 0,
  KWD: 3,
  NOK: 2,
  PLN: 2,
  SEK: 2,
  USD: 2,
};

export default defineTask<Input, Output>({
  key: 'enrich-product',
  description: 'Derives slug, normalised title and integer minor-unit price from a raw product row',
  inputKeys: [
    { key: 'sku', description: 'Stock keeping unit, e.g. "TS-0042"' },
    { key: 'title', description: 'Product title as entered' },
    { key: 'price', description: 'Price in major units, number or string such as "1,299.90"' },
    { key: 'currency', description: 'ISO 4217 code, any case' },
  ],
  outputKeys: [
    { key: 'slug', description: 'URL-safe slug made of the title and the SKU' },
    { key: 'normalizedTitle', description: 'Title with Unicode normalised and whitespace collapsed' },
    { key: 'priceMinor', description: 'Price as an integer in minor units (cents, pence, fils...)' },
    { key: 'currency', description: 'Upper-case ISO 4217 code' },
  ],
  handle(input) {
    const sku = requireText(input.sku, 'sku');
    const normalizedTitle = requireText(input.title, 'title').normalize('NFKC').replace(/\s+/g, ' ');
    const currency = parseCurrency(input.currency);
    return {
      slug: slugify(`${normalizedTitle} ${sku}`),
      normalizedTitle,
      priceMinor: toMinorUnits(input.price, MINOR_UNIT_DIGITS[currency] ?? 2),
      currency,
    };
  },
});

function requireText(value: unknown, key: string): string {
  if (typeof value !== 'string' || value.trim() === '') {
    throw new NonRetryableError(`input "${key}" must be a non-empty string`);
  }
  return value.trim();
}

function parseCurrency(value: unknown): string {
  const code = requireText(value, 'currency').toUpperCase();
  if (MINOR_UNIT_DIGITS[code] === undefined) {
    throw new NonRetryableError(
      `unknown currency "${code}"; expected one of ${Object.keys(MINOR_UNIT_DIGITS).join(', ')}`,
    );
  }
  return code;
}

function slugify(text: string): string {
  return text
    .normalize('NFKD')
    .replace(/\p{M}/gu, '') // accents: "Crème" becomes "Creme"
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
}

/**
 * Converts a price in major units to integer minor units, rounding half up, without going through binary floating
 * point (19.99 * 100 is 1998.9999999999998). Strings may use "," or "." as the decimal mark and the other one, a
 * space or an apostrophe between thousands: "1,299.90", "1.299,90", "1 299,90", "19.99".
 */
function toMinorUnits(price: unknown, digits: number): number {
  let decimal: string;
  if (typeof price === 'number') {
    if (!Number.isFinite(price))
      throw new NonRetryableError(`input "price" must be a finite number, got ${price}`);
    decimal = price.toFixed(12);
  } else if (typeof price === 'string') {
    decimal = normaliseDecimalString(price);
  } else {
    throw new NonRetryableError(`input "price" must be a number or a string, got ${typeof price}`);
  }
  const match = /^(\d+)(?:\.(\d+))?$/.exec(decimal);
  if (match === null)
    throw new NonRetryableError(`input "price" must be a non-negative amount, got "${String(price)}"`);
  const whole = match[1] ?? '0';
  const fraction = (match[2] ?? '').padEnd(digits + 1, '0');
  const roundUp = Number(fraction[digits]) >= 5;
  const minor = BigInt(whole + fraction.slice(0, digits)) + (roundUp ? 1n : 0n);
  if (minor > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new NonRetryableError(`input "price" is too large to express in minor units: "${String(price)}"`);
  }
  return Number(minor);
}

function normaliseDecimalString(text: string): string {
  const compact = text.trim().replace(/[\s'_]/g, '');
  const lastComma = compact.lastIndexOf(',');
  const lastDot = compact.lastIndexOf('.');
  // The rightmost mark is the decimal one when both appear; a lone comma is decimal only before 1-2 digits.
  const decimalMark =
    lastComma > lastDot && (lastDot !== -1 || /,\d{1,2}$/.test(compact)) ? ',' : lastDot !== -1 ? '.' : '';
  const thousandsMark = decimalMark === ',' ? '.' : ',';
  const withoutThousands = compact.split(thousandsMark).join('');
  return decimalMark === ',' ? withoutThousands.replace(',', '.') : withoutThousands;
}
