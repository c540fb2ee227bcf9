// Tests for the enrich-product example, run through runTaskLocally: the same input checks, retries and output
// checks the daemon applies, so this is also the pattern for testing a handler of your own.
import { describe, expect, it } from 'vitest';
import { runTaskLocally } from 'df-worker';
import enrichProduct from './enrich-product.ts';

const product = { sku: 'TS-0042', title: '  Crème   Brûlée  T-Shirt ', price: '19.99', currency: 'eur' };

describe('enrich-product', () => {
  it('derives slug, normalised title, minor-unit price and upper-case currency', async () => {
    const outcome = await runTaskLocally(enrichProduct, product);
    expect(outcome.status).toBe('COMPLETED');
    expect(outcome.output).toEqual({
      slug: 'creme-brulee-t-shirt-ts-0042',
      normalizedTitle: 'Crème Brûlée T-Shirt',
      priceMinor: 1999,
      currency: 'EUR',
    });
  });

  it.each([
    [19.99, 'USD', 1999],
    [1.005, 'USD', 101],
    ['1,299.90', 'USD', 129990],
    ['1.299,90', 'EUR', 129990],
    ['1 299,9', 'EUR', 129990],
    ['1,299', 'USD', 129900],
    ['1500', 'JPY', 1500],
    ['12.3456', 'KWD', 12346],
    [0, 'GBP', 0],
  ])('converts price %j in %s to %i minor units without float error', async (price, currency, priceMinor) => {
    const outcome = await runTaskLocally(enrichProduct, { ...product, price, currency });
    expect(outcome.output.priceMinor).toBe(priceMinor);
  });

  it('fails without retrying on an unknown currency', async () => {
    const outcome = await runTaskLocally(enrichProduct, { ...product, currency: 'XYZ' }, { retryCount: 3 });
    expect(outcome).toMatchObject({
      status: 'FAILED',
      attempts: 1,
      output: { errorName: 'NonRetryableError' },
    });
    expect(outcome.output.error).toMatch(/^unknown currency "XYZ"; expected one of .*EUR/);
  });

  it.each([['-5'], ['$19.99'], ['free'], [null]])('fails without retrying on price %j', async (price) => {
    const outcome = await runTaskLocally(enrichProduct, { ...product, price });
    expect(outcome).toMatchObject({
      status: 'FAILED',
      attempts: 1,
      output: { errorName: 'NonRetryableError' },
    });
    expect(outcome.output.error).toMatch(/^input "price" must be/);
  });

  it('fails before running when a declared input key is missing', async () => {
    const outcome = await runTaskLocally(enrichProduct, { sku: 'A', title: 'B', price: 1 });
    expect(outcome.output).toEqual({
      message: 'missing input key "currency" (declared in the task inputKeys)',
      error: 'missing input key "currency" (declared in the task inputKeys)',
      missingInputKeys: ['currency'],
    });
  });
});
