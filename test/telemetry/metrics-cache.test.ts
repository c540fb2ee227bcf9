// The /metrics render cache on a manual clock: at most one rendering per interval, shared by every scraper.
import { describe, expect, it } from 'vitest';
import { MetricsRenderCache } from '../../src/telemetry/metrics-cache.ts';

function renderer() {
  const calls: { resolve: (text: string) => void; reject: (error: Error) => void }[] = [];
  const render = () =>
    new Promise<string>((resolve, reject) => {
      calls.push({ resolve, reject });
    });
  return { render, calls };
}

describe('MetricsRenderCache', () => {
  it('renders once for every scrape that arrives while a rendering is under way, and serves them its bytes', async () => {
    const { render, calls } = renderer();
    const cache = new MetricsRenderCache(render, { intervalMs: 1_000, now: () => 0 });
    const scrapes = Array.from({ length: 100 }, () => cache.body());
    expect(calls).toHaveLength(1);
    calls[0]!.resolve('dfworker_ready 1\n');
    const bodies = await Promise.all(scrapes);
    expect(new Set(bodies.map((body) => body.toString()))).toEqual(new Set(['dfworker_ready 1\n']));
  });

  it('serves a rendering until the interval since it started has passed, then renders anew', async () => {
    const { render, calls } = renderer();
    let now = 0;
    const cache = new MetricsRenderCache(render, { intervalMs: 1_000, now: () => now });
    const first = cache.body();
    now = 300;
    calls[0]!.resolve('a 1\n');
    await first;
    now = 999;
    expect((await cache.body()).toString()).toBe('a 1\n');
    expect(calls).toHaveLength(1);
    now = 1_000;
    const second = cache.body();
    expect(calls).toHaveLength(2);
    calls[1]!.resolve('a 2\n');
    expect((await second).toString()).toBe('a 2\n');
  });

  it('does not start a second rendering while a slow one is under way, even past the interval', async () => {
    const { render, calls } = renderer();
    let now = 0;
    const cache = new MetricsRenderCache(render, { intervalMs: 100, now: () => now });
    const first = cache.body();
    now = 5_000;
    const meanwhile = cache.body();
    expect(calls).toHaveLength(1);
    calls[0]!.resolve('slow 1\n');
    expect((await meanwhile).toString()).toBe('slow 1\n');
    await first;
    void cache.body();
    expect(calls).toHaveLength(2);
  });

  it('serves a failed rendering as a failure for the interval: a flood cannot make it render more often', async () => {
    const { render, calls } = renderer();
    let now = 0;
    const cache = new MetricsRenderCache(render, { intervalMs: 1_000, now: () => now });
    const first = cache.body();
    calls[0]!.reject(new Error('collector failed'));
    await expect(first).rejects.toThrow('collector failed');
    now = 500;
    await expect(cache.body()).rejects.toThrow('collector failed');
    expect(calls).toHaveLength(1);
    now = 1_000;
    const retry = cache.body();
    calls[1]!.resolve('ok 1\n');
    expect((await retry).toString()).toBe('ok 1\n');
  });

  it('with interval 0 renders for each scrape, but still one rendering for scrapes that overlap it', async () => {
    const { render, calls } = renderer();
    const cache = new MetricsRenderCache(render, { intervalMs: 0, now: () => 0 });
    const overlapping = [cache.body(), cache.body()];
    expect(calls).toHaveLength(1);
    calls[0]!.resolve('x 1\n');
    await Promise.all(overlapping);
    const next = cache.body();
    expect(calls).toHaveLength(2);
    calls[1]!.resolve('x 2\n');
    expect((await next).toString()).toBe('x 2\n');
  });
});
