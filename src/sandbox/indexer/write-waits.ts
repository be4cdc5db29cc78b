/** Writes whose indexing wait is kept, for /sandbox/info and the benchmark. */
const WAIT_SAMPLES = 1024;

/** How long the last writes waited to be indexed before they were answered, in ms. */
export function createWriteWaits() {
  /** A ring of the last WAIT_SAMPLES waits. */
  const waits: number[] = [];
  let count = 0;
  return {
    add(ms: number): void {
      waits[count++ % WAIT_SAMPLES] = ms;
    },
    /** How many writes so far, and the median and p99 of the last ones (null before any). */
    stats(): { writes: number; p50Ms: number | null; p99Ms: number | null } {
      const sorted = waits.slice(0, Math.min(count, WAIT_SAMPLES)).sort((a, b) => a - b);
      const at = (p: number) =>
        sorted.length === 0
          ? null
          : Math.round(
              (sorted[
                Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))
              ] as number) * 100,
            ) / 100;
      return { writes: count, p50Ms: at(50), p99Ms: at(99) };
    },
  };
}
