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

/** USDC and the vaults' shares both have 6 decimals. */
const AMOUNT_DECIMALS = 6;

/**
 * An amount the service gives as decimal text ("12.5"), with its raw units beside it:
 * "12.5 USDC (12500000 raw)". Text that is not a plain decimal is shown as it came.
 */
export function amountWithRaw(decimal: string | number, unit = 'USDC'): string {
  const text = String(decimal);
  const match = /^(\d+)(?:\.(\d+))?$/.exec(text);
  if (!match || (match[2]?.length ?? 0) > AMOUNT_DECIMALS) return text;
  const raw = BigInt(`${match[1]}${(match[2] ?? '').padEnd(AMOUNT_DECIMALS, '0')}`);
  return `${text}${unit ? ` ${unit}` : ''} (${raw} raw)`;
}

/** An amount the service gives in raw units ("12500000"), as a decimal beside them. */
export function rawWithAmount(raw: string, unit = ''): string {
  if (!/^\d+$/.test(raw)) return raw;
  return `${rawToDecimal(raw)}${unit ? ` ${unit}` : ''} (${BigInt(raw)} raw)`;
}

/**
 * Raw units ("12500000") as the decimal they stand for ("12.5"), exactly, for a narrow table
 * (--wide and --json give the raw units). Text that is not whole digits is returned as it is.
 */
export function rawToDecimal(raw: string): string {
  if (!/^\d+$/.test(raw)) return raw;
  const digits = raw.padStart(AMOUNT_DECIMALS + 1, '0');
  const whole = digits.slice(0, -AMOUNT_DECIMALS).replace(/^0+(?=\d)/, '');
  const fraction = digits.slice(-AMOUNT_DECIMALS).replace(/0+$/, '');
  return fraction ? `${whole}.${fraction}` : whole;
}

/** An amount in wei (18 decimals), as ETH beside it: "1.5 ETH (1500000000000000000 wei)". */
export function weiWithEth(wei: string): string {
  if (!/^\d+$/.test(wei)) return wei;
  const digits = wei.padStart(19, '0');
  const whole = digits.slice(0, -18).replace(/^0+(?=\d)/, '');
  const fraction = digits.slice(-18).replace(/0+$/, '');
  return `${fraction ? `${whole}.${fraction}` : whole} ETH (${BigInt(wei)} wei)`;
}

/**
 * An object as `key  value` lines, a nested object as its key alone, then its own fields
 * indented under it (rather than one long line of key=value pairs). Arrays of scalars are
 * joined; null is "none".
 *
 *   nestedFieldLines({ clock: { now: 1, offset_seconds: 0 } })
 *   // ["clock", "  now             1", "  offset_seconds  0"]
 */
export function nestedFieldLines(
  value: Record<string, unknown>,
  bold: (text: string) => string = (text) => text,
  indent = '',
): string[] {
  const width = Math.max(0, ...Object.keys(value).map((key) => key.length));
  const lines: string[] = [];
  for (const [key, field] of Object.entries(value)) {
    if (typeof field === 'object' && field !== null && !Array.isArray(field)) {
      lines.push(`${indent}${bold(key)}`);
      lines.push(...nestedFieldLines(field as Record<string, unknown>, bold, `${indent}  `));
    } else {
      lines.push(
        `${indent}${bold(key.padEnd(width))}  ${field === null ? 'none' : cellText(field)}`,
      );
    }
  }
  return lines;
}

/** 0x1234…abcd: an address in a human table or line; --wide and --json give it whole. */
export function shortAddress(address: string): string {
  return `${address.slice(0, 6)}…${address.slice(-4)}`;
}

/** A profile setting as shown: an API key by its prefix only (it is a secret). */
export function maskedSetting(key: string, value: string | undefined): string | undefined {
  return key === 'api_key' && value ? `${value.slice(0, 12)}…` : value;
}
