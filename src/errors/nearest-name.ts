// "Did you mean ...?": the known name closest to a misspelt one (a DF_* variable, a config file key, a task
// key), by the edit distance that counts a swap of two neighbouring letters as one typo. Used by the messages
// of config/ (unknown settings), cli/ (check --online) and daemon/ (a handler without its task).

/**
 * Optimal string alignment distance (the restricted Damerau-Levenshtein distance): insertions, deletions,
 * substitutions and transpositions of adjacent characters each cost 1, so `KYE` is one typo from `KEY`.
 */
export function editDistance(a: string, b: string): number {
  // Three rows suffice: a transposition looks two rows back.
  let before = new Array<number>(b.length + 1).fill(0);
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        best = Math.min(best, before[j - 2]! + 1);
      }
      current.push(best);
    }
    before = previous;
    previous = current;
  }
  return previous[b.length]!;
}

/**
 * Typos allowed for a name of this length: 1 up to 11 characters, 2 up to 17, 3 beyond. Short names get
 * one, so that `my-task` does not suggest `my-tusk-2`; long `DF_*` names share much of their spelling with
 * each other, so even they get no more than 3.
 */
export function typosAllowed(length: number): number {
  return Math.min(3, Math.max(1, Math.floor(length / 6)));
}

/**
 * The candidate nearest to `name`, ignoring case, when it is within `typosAllowed` of it; undefined when
 * none is that close (or `name` is itself a candidate). Ties go to the candidate listed first.
 */
export function nearestName(name: string, candidates: Iterable<string>): string | undefined {
  const wanted = name.toLowerCase();
  let best: { candidate: string; distance: number } | undefined;
  for (const candidate of candidates) {
    if (candidate === name) return undefined;
    const distance = editDistance(wanted, candidate.toLowerCase());
    if (best === undefined || distance < best.distance) best = { candidate, distance };
  }
  return best !== undefined && best.distance <= typosAllowed(name.length) ? best.candidate : undefined;
}
