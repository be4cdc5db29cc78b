import type { MetaStore } from './store/meta.ts';

const OFFSET_KEY = 'clock_offset_seconds';

/**
 * Sandbox time: the real clock plus an offset that only moves forward.
 * Nonce expiry and cooldowns read this clock, so tests and operators can skip ahead
 * with POST /sandbox/clock/advance instead of waiting. The offset is persisted.
 */
export interface SandboxClock {
  nowMs(): number;
  nowSeconds(): number;
  offsetSeconds(): number;
  advance(seconds: number): void;
}

export function createSandboxClock(
  meta: MetaStore,
  realNowMs: () => number = Date.now,
): SandboxClock {
  let offset = Number(meta.get(OFFSET_KEY) ?? 0);
  const nowMs = () => realNowMs() + offset * 1000;
  return {
    nowMs,
    nowSeconds: () => Math.floor(nowMs() / 1000),
    offsetSeconds: () => offset,
    advance(seconds) {
      offset += seconds;
      meta.set(OFFSET_KEY, String(offset));
    },
  };
}
