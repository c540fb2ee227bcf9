// A small seeded source of randomness (mulberry32): the same sequence for the same seed, for the emulator's
// fault rates, the replay's workloads and the tests' random arrivals. Not for anything secret.

/** mulberry32: a 32-bit PRNG whose sequence depends only on its seed. Values in [0, 1). */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
