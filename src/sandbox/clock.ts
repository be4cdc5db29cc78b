import type { MetaStore } from './store/meta.ts';

const OFFSET_KEY = 'clock_offset_seconds';

/**
 * Sandbox time: the real clock plus an offset that only moves forward.
 * Nonce expiry, cooldowns and chain time read this clock, so tests and operators can skip
 * ahead with POST /sandbox/clock/advance instead of waiting. The offset is persisted.
 */
export interface SandboxClock {
  nowMs(): number;
  nowSeconds(): number;
  offsetSeconds(): number;
  /** Sets and persists the offset; call inside the transaction that commits its block. */
  setOffset(seconds: number): void;
  /** Moves the offset forward so that now is at least `seconds` (never back). */
  raiseTo(seconds: number): void;
  /** Reads the offset again, after a restore put another one in the database. */
  reload(): void;
}

export function createSandboxClock(
  meta: MetaStore,
  realNowMs: () => number = Date.now,
): SandboxClock {
  let offset = Number(meta.get(OFFSET_KEY) ?? 0);
  const nowMs = () => realNowMs() + offset * 1000;
  const nowSeconds = () => Math.floor(nowMs() / 1000);
  const setOffset = (seconds: number) => {
    meta.set(OFFSET_KEY, String(seconds));
    offset = seconds;
  };
  return {
    nowMs,
    nowSeconds,
    offsetSeconds: () => offset,
    setOffset,
    raiseTo(seconds) {
      const behind = seconds - nowSeconds();
      if (behind > 0) setOffset(offset + behind);
    },
    reload() {
      offset = Number(meta.get(OFFSET_KEY) ?? 0);
    },
  };
}
