import { describe, expect, it } from 'vitest';
import {
  amountWithRaw,
  cellText,
  clip,
  fieldLines,
  rawWithAmount,
  strategyFields,
  timeWithHint,
  wrapText,
} from '../../src/cli/format.ts';

describe('human formats', () => {
  it('shows amounts in USDC with their raw units, exactly', () => {
    expect(amountWithRaw('12.5')).toBe('12.5 USDC (12500000 raw)');
    expect(amountWithRaw(0)).toBe('0 USDC (0 raw)');
    expect(amountWithRaw('123456789.123456')).toBe('123456789.123456 USDC (123456789123456 raw)');
    expect(amountWithRaw('3', 'shares')).toBe('3 shares (3000000 raw)');
    // Not a plain decimal: shown as it came, never guessed at.
    expect(amountWithRaw('1.1234567')).toBe('1.1234567');
    expect(amountWithRaw('n/a')).toBe('n/a');
    expect(rawWithAmount('12500000', 'USDC')).toBe('12.5 USDC (12500000 raw)');
    expect(rawWithAmount('1', 'shares')).toBe('0.000001 shares (1 raw)');
    expect(rawWithAmount('5000000', 'USDC')).toBe('5 USDC (5000000 raw)');
    expect(rawWithAmount('0', 'USDC')).toBe('0 USDC (0 raw)');
    expect(rawWithAmount('-1', 'USDC')).toBe('-1');
  });

  const now = Date.UTC(2026, 10, 22, 8, 0, 0);

  it('shows times as ISO 8601 UTC with a relative hint', () => {
    expect(timeWithHint(now / 1000 + 23 * 3600, now)).toBe('2026-11-23T07:00:00Z (in 23 h)');
    expect(timeWithHint(now / 1000 - 90, now)).toBe('2026-11-22T07:58:30Z (2 min ago)');
    expect(timeWithHint(now / 1000 - 3 * 86_400, now)).toBe('2026-11-19T08:00:00Z (3 d ago)');
    expect(timeWithHint(now / 1000, now)).toBe('2026-11-22T08:00:00Z (now)');
  });

  it('puts nested values in a cell as key=value pairs, not JSON', () => {
    expect(cellText({ usdc: '0x1', vaults: { moderate: '0x2' } })).toBe(
      'usdc=0x1 vaults=moderate=0x2',
    );
    expect(cellText(['a', 'b'])).toBe('a, b');
    expect(cellText(null)).toBe('');
    expect(cellText(12.5)).toBe('12.5');
  });

  it("shows each risk parameter with the unit its flag's help gives", () => {
    expect(
      strategyFields({
        name: 'x',
        max_leverage: 300,
        stop_loss_percent: 250,
        correlation_threshold: 70,
      }),
    ).toEqual({
      name: 'x',
      max_leverage: '300 (3x)',
      stop_loss_percent: '250 bps (2.5 %)',
      correlation_threshold: '70 (0.7)',
    });
  });
});

describe('80 columns', () => {
  const hash = `0x${'ab'.repeat(32)}`;

  it('clips a long text with an ellipsis, and leaves a short one', () => {
    expect(clip('Delta Neutral Basis Trade Vault', 14)).toBe('Delta Neutral…');
    expect(clip('moderate', 14)).toBe('moderate');
  });

  it('wraps at spaces, keeping a word longer than the width whole', () => {
    expect(wrapText('one two three four', 9)).toEqual(['one two', 'three', 'four']);
    expect(wrapText(`tx ${hash}`, 20)).toEqual(['tx', hash]);
  });

  it('keeps field lines within the width: a value wraps under its column, or under its key', () => {
    const lines = fieldLines({ tx: hash, description: 'word '.repeat(30).trim() });
    expect(lines[0]).toBe(`tx           ${hash}`);
    expect(lines[1]).toMatch(/^description {2}word/);
    expect(lines[2]).toMatch(/^ {13}word/);
    // A 66-character hash after a 15-character key would need 83 columns.
    const under = fieldLines({ previous_status: 'live', strategy_id: hash });
    expect(under).toEqual(['previous_status  live', 'strategy_id', `  ${hash}`]);
    expect([...lines, ...under].every((line) => line.length <= 80)).toBe(true);
  });
});
