import type { VaultState } from './projection.ts';

/**
 * A vault's numbers from its state (projection.ts), exactly as SandboxVault.sol computes them:
 * yield is simple interest on the assets held since the last accrual, and conversions are
 * OpenZeppelin ERC-4626's with no decimals offset.
 */

export const YEAR_SECONDS = 365 * 24 * 3600;
/** The vaults' shares have the asset's 6 decimals. */
export const SHARE_UNIT = 10n ** 6n;

/** totalAssets() at chain time `at`. */
export function totalAssetsAt(state: VaultState, at: number): bigint {
  const held = state.balance - state.reserved;
  const elapsed = BigInt(Math.max(0, at - Number(state.lastAccrual)));
  return held + (held * state.apyBps * elapsed) / (10_000n * BigInt(YEAR_SECONDS));
}

/** convertToAssets(shares): shares × (totalAssets + 1) / (totalSupply + 1), rounded down. */
export function convertToAssets(shares: bigint, totalAssets: bigint, totalSupply: bigint): bigint {
  return (shares * (totalAssets + 1n)) / (totalSupply + 1n);
}

/** A share price as an exact ratio, for growth rates finer than pricePerShare's 6 decimals. */
export interface Price {
  assets: bigint;
  supply: bigint;
}

export function priceAt(state: VaultState, at: number): Price {
  return { assets: totalAssetsAt(state, at) + 1n, supply: state.totalSupply + 1n };
}

/**
 * The share price's growth from `from` to `to`, annualised without compounding, in percent:
 * (p1 / p0 − 1) × year / seconds × 100. 0 over no time.
 */
export function annualisedGrowth(from: Price, to: Price, seconds: number): number {
  if (seconds <= 0) return 0;
  const scale = 10n ** 18n;
  const ratio = (to.assets * from.supply * scale) / (to.supply * from.assets);
  const growth = Number(ratio - scale) / 1e18;
  return roundRate((growth * YEAR_SECONDS * 100) / seconds);
}

/**
 * The rate the share price grows at right now, annualised, in percent: the yield rate on the
 * assets held over totalAssets (which includes the yield not yet accrued); the yield rate
 * itself when the vault holds nothing, which is what a first depositor earns.
 */
export function currentRate(state: VaultState, at: number): number {
  const rate = Number(state.apyBps) / 100;
  const held = state.balance - state.reserved;
  const total = totalAssetsAt(state, at);
  if (held <= 0n || total <= 0n) return rate;
  return roundRate((rate * Number((held * 10n ** 12n) / total)) / 1e12);
}

/** Rates to 6 decimals: finer than any rate means, and stable across platforms. */
export function roundRate(value: number): number {
  return Math.round(value * 1e6) / 1e6 || 0;
}
