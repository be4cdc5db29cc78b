import type { MetaStore } from './store/meta.ts';

const OFFSET_KEY = 'clock_offset_seconds';

/** Where the offset persists: a transaction's repositories (the tx of the commit). */
export interface ClockTx {
  meta: Pick<MetaStore, 'set'>;
}

/**
 * Sandbox time: the real clock plus an offset that only moves forward.
 * Nonce expiry, cooldowns and chain time read this clock, so tests and operators can skip
 * ahead with POST /sandbox/clock/advance instead of waiting. The offset is persisted.
 */
export interface SandboxClock {
  nowMs(): number;
  nowSeconds(): number;
  offsetSeconds(): number;
  /** Sets and persists the offset, through `tx`: the transaction that commits its block. */
  setOffset(tx: ClockTx, seconds: number): Promise<void>;
  /** Moves the offset forward so that now is at least `seconds` (never back), through `tx`. */
  raiseTo(tx: ClockTx, seconds: number): Promise<void>;
  /** Reads the offset again, after a restore put another one in the database. */
  reload(): Promise<void>;
}

/** The clock, at the offset `meta` holds. */
export async function createSandboxClock(
  meta: Pick<MetaStore, 'get'>,
  realNowMs: () => number = Date.now,
): Promise<SandboxClock> {
  const read = async () => Number((await meta.get(OFFSET_KEY)) ?? 0);
  let offset = await read();
  const nowMs = () => realNowMs() + offset * 1000;
  const nowSeconds = () => Math.floor(nowMs() / 1000);
  const setOffset = async (tx: ClockTx, seconds: number) => {
    await tx.meta.set(OFFSET_KEY, String(seconds));
    offset = seconds;
  };
  return {
    nowMs,
    nowSeconds,
    offsetSeconds: () => offset,
    setOffset,
    async raiseTo(tx, seconds) {
      const behind = seconds - nowSeconds();
      if (behind > 0) await setOffset(tx, offset + behind);
    },
    async reload() {
      offset = await read();
    },
  };
}
