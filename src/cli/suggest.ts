/** Edit distance (insertions, deletions, substitutions, adjacent swaps) between two words. */
function distance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) (rows[0] as number[])[j] = j;
  for (let i = 1; i <= a.length; i++) {
    const row = rows[i] as number[];
    const above = rows[i - 1] as number[];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row[j] = Math.min(
        (above[j] as number) + 1,
        (row[j - 1] as number) + 1,
        (above[j - 1] as number) + cost,
      );
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        row[j] = Math.min(row[j] as number, ((rows[i - 2] as number[])[j - 2] as number) + 1);
      }
    }
  }
  return (rows[a.length] as number[])[b.length] as number;
}

/**
 * The candidate closest to `word`, when it is close enough to be a typo (as commander and
 * git judge it: at most a third of the word's length, and at most 3 edits), else undefined.
 */
export function closest(word: string, candidates: readonly string[]): string | undefined {
  const lower = word.toLowerCase();
  let best: { candidate: string; edits: number } | undefined;
  for (const candidate of candidates) {
    const edits = distance(lower, candidate.toLowerCase());
    if (
      edits <= Math.min(3, Math.max(1, Math.floor(word.length / 3))) &&
      (!best || edits < best.edits)
    ) {
      best = { candidate, edits };
    }
  }
  if (best) return best.candidate;
  // A field named by its first words ("max_position_size" for "max_position_size_percent").
  const longer = candidates.filter(
    (candidate) =>
      lower.length >= 4 &&
      /^[_-]/.test(candidate.toLowerCase().slice(lower.length)) &&
      candidate.toLowerCase().startsWith(lower),
  );
  return longer.length === 1 ? longer[0] : undefined;
}

/** " (did you mean X?)" for a near miss, else "". */
export function didYouMean(word: string, candidates: readonly string[]): string {
  const match = closest(word, candidates);
  return match ? ` (did you mean ${match}?)` : '';
}

/** A message with its did-you-means, and the same message without them (for --quiet). */
export interface Suggesting {
  text: string;
  quiet: string;
}

/**
 * Builds a message twice: with `suggest` giving " (did you mean X?)" for a near miss, and with
 * it giving nothing. CliError takes both; --quiet reports the second.
 *
 * @example
 * new CliError(suggesting((suggest) => `vault ${v}: must be one of …${suggest(v, VAULT_IDS)}`), EXIT.usage)
 */
export function suggesting(
  build: (suggest: (word: string, candidates: readonly string[]) => string) => string,
): Suggesting {
  return { text: build(didYouMean), quiet: build(() => '') };
}
