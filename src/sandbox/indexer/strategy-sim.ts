import { hexToBytes, keccak256 } from 'viem';
import { roundRate } from './vault-math.ts';

/**
 * The sandbox's strategies trade nothing, so their performance is simulated: a deterministic
 * series of daily returns, seeded by the strategy's id, that starts when the strategy enters
 * paper trading and gains one return per day of sandbox time. The same id and time always
 * give the same series. Formulas (documented in docs/data-api.md):
 *
 * - drift μ (a year) is uniform in [−5 %, 35 %] and volatility σ (a year) in [5 %, 45 %], the
 *   first two draws of the strategy's generator;
 * - day d's return is r_d = μ/365 + σ/√365 · z_d, with z_d standard normal (Box–Muller);
 * - apy = mean(r) × 365, in percent;
 * - sharpeRatio = mean(r) / sd(r) × √365 (no risk-free rate; 0 under two days);
 * - maxDrawdown = the largest fall from a peak of Π(1 + r), in percent;
 * - riskScore = ⌈σ / 5 %⌉, from 1 to 10.
 */

export const DAY_SECONDS = 24 * 3600;

export interface Performance {
  apy: number;
  sharpeRatio: number;
  maxDrawdown: number;
  riskScore: number;
  /** Each day's return in percent, at the end of its day (Unix seconds). */
  returns: Array<{ timestamp: number; value: number }>;
}

/** sfc32, seeded from keccak256 of the strategy id: a small, well-mixed generator. */
function generator(id: string): () => number {
  const bytes = hexToBytes(keccak256(new TextEncoder().encode(id.toLowerCase())));
  const view = new DataView(bytes.buffer);
  let a = view.getUint32(0);
  let b = view.getUint32(4);
  let c = view.getUint32(8);
  let d = view.getUint32(12);
  return () => {
    a >>>= 0;
    b >>>= 0;
    c >>>= 0;
    d >>>= 0;
    let t = (a + b) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    d = (d + 1) | 0;
    t = (t + d) | 0;
    c = (c + t) | 0;
    return (t >>> 0) / 4294967296;
  };
}

interface Series {
  drift: number;
  volatility: number;
  returns: number[];
  next: () => number;
}

/** Series drawn so far, by id; bounded, the oldest dropped first. */
const cache = new Map<string, Series>();
const CACHE_SIZE = 1000;

/** The first `days` daily returns (fractions) of the strategy's series. */
function series(id: string, days: number): Series {
  let found = cache.get(id);
  if (!found) {
    const next = generator(id);
    found = { drift: -0.05 + 0.4 * next(), volatility: 0.05 + 0.4 * next(), returns: [], next };
    if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value as string);
    cache.set(id, found);
  }
  const daily = { drift: found.drift / 365, volatility: found.volatility / Math.sqrt(365) };
  while (found.returns.length < days) {
    // Box–Muller; 1 − u keeps the logarithm finite.
    const z = Math.sqrt(-2 * Math.log(1 - found.next())) * Math.cos(2 * Math.PI * found.next());
    found.returns.push(daily.drift + daily.volatility * z);
  }
  return found;
}

/**
 * The strategy's performance at sandbox time `now`, with returns since `paperTradingAt`
 * (none when it has not reached paper trading).
 */
export function simulatePerformance(
  id: string,
  paperTradingAt: number | null,
  now: number,
): Performance {
  const days =
    paperTradingAt === null ? 0 : Math.max(0, Math.floor((now - paperTradingAt) / DAY_SECONDS));
  const drawn = series(id, days);
  const volatility = drawn.volatility;
  const returns = drawn.returns.slice(0, days);
  const riskScore = Math.min(10, Math.max(1, Math.ceil(volatility / 0.05)));
  const mean = returns.reduce((sum, r) => sum + r, 0) / (returns.length || 1);
  const variance =
    returns.length > 1
      ? returns.reduce((sum, r) => sum + (r - mean) ** 2, 0) / (returns.length - 1)
      : 0;
  let value = 1;
  let peak = 1;
  let drawdown = 0;
  for (const r of returns) {
    value *= 1 + r;
    peak = Math.max(peak, value);
    drawdown = Math.max(drawdown, (peak - value) / peak);
  }
  return {
    apy: returns.length > 0 ? roundRate(mean * 365 * 100) : 0,
    sharpeRatio: variance > 0 ? roundRate((mean / Math.sqrt(variance)) * Math.sqrt(365)) : 0,
    maxDrawdown: roundRate(drawdown * 100),
    riskScore,
    returns: returns.map((r, day) => ({
      timestamp: (paperTradingAt as number) + (day + 1) * DAY_SECONDS,
      value: roundRate(r * 100),
    })),
  };
}
