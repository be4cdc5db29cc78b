import { Option } from 'commander';

/**
 * Human renderings shared by the commands; --json never goes through these. A human table
 * fits TABLE_WIDTH columns: addresses shortened, vaults shown by id, long names clipped, amounts
 * without their raw units; `--wide` (wideOption) shows every value whole.
 */

/** The width every human table and line fits in (without --wide). */
export const TABLE_WIDTH = 80;

/** `--wide`, for every command with a table that shortens values. */
export const wideOption = () =>
  new Option('--wide', 'whole addresses, names and raw amounts (tables may exceed 80 columns)');

/** At most `width` characters: a longer text ends in "…" (--wide shows it whole). */
export function clip(text: string, width: number): string {
  return [...text].length <= width ? text : `${[...text].slice(0, width - 1).join('')}…`;
}

/**
 * Text as lines of at most `width` characters, broken at spaces; a word longer than the width
 * (a hash, a path) stays whole on its own line, since a broken one could not be copied.
 */
export function wrapText(text: string, width: number): string[] {
  const lines: string[] = [];
  for (const paragraph of text.split('\n')) {
    let current = '';
    for (const word of paragraph.split(' ')) {
      if (current === '') current = word;
      else if ([...current].length + 1 + [...word].length <= width) current += ` ${word}`;
      else {
        lines.push(current);
        current = word;
      }
    }
    lines.push(current);
  }
  return lines;
}

/**
 * `key  value` lines with the keys padded to one column, each within `width`: a long value
 * wraps under its column, or, when a word of it would not fit there (a 66-character hash
 * after a long key), starts on the next line indented by two.
 *
 *   fieldLines({ tx: '0xab…' })  // ["tx  0xab…"]
 */
export function fieldLines(
  value: Record<string, unknown>,
  bold: (text: string) => string = (text) => text,
  width = TABLE_WIDTH,
): string[] {
  const keyWidth = Math.max(0, ...Object.keys(value).map((key) => key.length));
  const column = keyWidth + 2;
  return Object.entries(value).flatMap(([key, field]) => {
    const shown = cellText(field);
    const label = bold(key.padEnd(keyWidth));
    if (column + [...shown].length <= width && !shown.includes('\n')) {
      return [`${label}  ${shown}`];
    }
    const longest = Math.max(0, ...shown.split(/[ \n]/).map((word) => [...word].length));
    if (column + longest <= width) {
      const [first = '', ...rest] = wrapText(shown, width - column);
      return [`${label}  ${first}`, ...rest.map((line) => `${' '.repeat(column)}${line}`)];
    }
    return [bold(key.trimEnd()), ...wrapText(shown, width - 2).map((line) => `  ${line}`)];
  });
}

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

/** Every amount shown carries its unit: an amount without one reads as anything. */
export type AmountUnit = 'USDC' | 'shares';

/**
 * An amount the service gives as decimal text ("12.5"), with its raw units beside it:
 * "12.5 USDC (12500000 raw)". Text that is not a plain decimal is shown as it came.
 */
export function amountWithRaw(decimal: string | number, unit: AmountUnit = 'USDC'): string {
  const text = String(decimal);
  const match = /^(\d+)(?:\.(\d+))?$/.exec(text);
  if (!match || (match[2]?.length ?? 0) > AMOUNT_DECIMALS) return text;
  const raw = BigInt(`${match[1]}${(match[2] ?? '').padEnd(AMOUNT_DECIMALS, '0')}`);
  return `${text} ${unit} (${raw} raw)`;
}

/** An amount the service gives in raw units ("12500000"), as a decimal beside them. */
export function rawWithAmount(raw: string, unit: AmountUnit): string {
  if (!/^\d+$/.test(raw)) return raw;
  return `${rawToDecimal(raw)} ${unit} (${BigInt(raw)} raw)`;
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
      const shown = { [key.padEnd(width)]: field === null ? 'none' : field };
      lines.push(
        ...fieldLines(shown, bold, TABLE_WIDTH - indent.length).map((line) => `${indent}${line}`),
      );
    }
  }
  return lines;
}

/** 0x1234…abcd: an address (or a 66-character id) in a human table; --wide and --json give it whole. */
export function shortAddress(address: string): string {
  return `${address.slice(0, 6)}…${address.slice(-4)}`;
}

/** A profile setting as shown: an API key by its prefix only (it is a secret). */
export function maskedSetting(key: string, value: string | undefined): string | undefined {
  return key === 'api_key' && value ? `${value.slice(0, 12)}…` : value;
}

/** A size for people: "512 B", "12.3 KB", "4.5 MB", "1.2 GB" (powers of 1024). */
export function byteSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let value = bytes / 1024;
  let unit = 0;
  // 1023.97 KB would round to "1024.0 KB": that is 1.0 MB.
  while (value >= 1023.95 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}
