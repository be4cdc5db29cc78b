import { describe, expect, it } from 'vitest';
import { cellText, strategyFields, timeWithHint } from '../../src/cli/format.ts';

describe('human formats', () => {
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
