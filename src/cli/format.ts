/** Human renderings shared by the commands; --json never goes through these. */

/** "2026-11-22T08:09:24Z (in 23 h)": ISO 8601 UTC, and how far from now. */
export function timeWithHint(unixSeconds: number, nowMs = Date.now()): string {
  const iso = new Date(unixSeconds * 1000).toISOString().replace(/\.000Z$/, 'Z');
  return `${iso} (${relative(unixSeconds * 1000 - nowMs)})`;
}

function relative(deltaMs: number): string {
  const seconds = Math.round(Math.abs(deltaMs) / 1000);
  const [amount, unit] =
    seconds < 60
      ? [seconds, 's']
      : seconds < 3600
        ? [Math.round(seconds / 60), 'min']
        : seconds < 86_400
          ? [Math.round(seconds / 3600), 'h']
          : [Math.round(seconds / 86_400), 'd'];
  if (seconds < 1) return 'now';
  return deltaMs > 0 ? `in ${amount} ${unit}` : `${amount} ${unit} ago`;
}

/** A table cell: scalars as they are, nested values as `key=value` pairs rather than JSON. */
export function cellText(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (Array.isArray(value)) return value.map(cellText).join(', ');
  if (typeof value === 'object') {
    return Object.entries(value as Record<string, unknown>)
      .map(
        ([key, field]) =>
          `${key}=${typeof field === 'object' && field !== null ? cellText(field) : String(field)}`,
      )
      .join(' ');
  }
  return String(value);
}

/** What each strategy risk field's number means, as `strategy submit --help` says. */
const RISK_UNITS: Record<string, (value: number) => string> = {
  max_position_size_percent: (value) => `${value} % of the vault`,
  max_leverage: (value) => `${value} (${value / 100}x)`,
  stop_loss_percent: (value) => `${value} bps (${value / 100} %)`,
  slippage_tolerance_bps: (value) => `${value} bps (${value / 100} %)`,
  correlation_threshold: (value) => `${value} (${value / 100})`,
  velocity_limit: (value) => `${value} per period`,
};

/** A strategy request's fields, each risk parameter with its unit. */
export function strategyFields(request: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(request).map(([key, value]) => {
      const unit = RISK_UNITS[key];
      return [key, unit && typeof value === 'number' ? unit(value) : value];
    }),
  );
}
