/**
 * Exact JSON numbers. JSON.parse turns every number into a binary double, so
 * 0.123456789012345678 arrives rounded and 2^53 + 1 arrives as 2^53. Where that happens,
 * the sandbox's body parser keeps the number's source text instead (an InexactNumber), and
 * the schemas read amounts from decimal digits, never through floating point.
 */

/** A JSON number that a JS number would round: its text, as written by the client. */
export class InexactNumber {
  readonly source: string;

  constructor(source: string) {
    this.source = source;
  }
}

/** A decimal as ±digits × 10^exponent, digits without leading or trailing zeros ('' is 0). */
export interface DecimalParts {
  negative: boolean;
  digits: string;
  exponent: number;
}

/** JSON's number grammar, loosened to leading zeros (what `String(number)` and CLI input hold). */
const NUMBER_TEXT = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

/** The exact value of number text such as "1e-7" or "0.50", or undefined for "Infinity". */
export function decimalParts(text: string): DecimalParts | undefined {
  const match = NUMBER_TEXT.exec(text);
  if (!match) return undefined;
  const [, sign, whole = '', fraction = '', power = '0'] = match;
  const padded = `${whole}${fraction}`.replace(/^0+/, '');
  // A loop, not /0+$/: that regex backtracks at every zero, quadratic in a 64 KiB number.
  let end = padded.length;
  while (end > 0 && padded.charCodeAt(end - 1) === 48) end--;
  const digits = padded.slice(0, end);
  if (digits === '') return { negative: false, digits: '', exponent: 0 };
  // An absurd exponent (1e99999999999) becomes ±Infinity, which still compares right.
  const exponent = Number(power) - fraction.length + (padded.length - digits.length);
  return { negative: sign === '-', digits, exponent };
}

function sameValue(a: DecimalParts | undefined, b: DecimalParts | undefined): boolean {
  return (
    a !== undefined &&
    b !== undefined &&
    a.negative === b.negative &&
    a.digits === b.digits &&
    a.exponent === b.exponent
  );
}

/**
 * The number JSON text `source` stands for: `value` (what JSON.parse made of it) when that
 * prints as the same decimal (1e-7 for "0.0000001", 1 for "1.0"), else an InexactNumber.
 */
export function exactNumber(value: number, source: string): number | InexactNumber {
  if (source === String(value)) return value;
  return sameValue(decimalParts(source), decimalParts(String(value)))
    ? value
    : new InexactNumber(source);
}

/** The exact decimal a JSON number stands for; undefined for NaN and ±Infinity. */
export function decimalOf(value: number | InexactNumber): DecimalParts | undefined {
  return decimalParts(value instanceof InexactNumber ? value.source : String(value));
}

export function decimalPlaces(parts: DecimalParts): number {
  return Math.max(0, -parts.exponent);
}

/** True when the (non-negative) decimal is more than `max`, a non-negative safe integer. */
export function exceeds({ digits, exponent }: DecimalParts, max: number): boolean {
  const limit = String(max);
  const wholeDigits = digits.length + exponent;
  if (digits === '' || wholeDigits < limit.length) return false;
  if (wholeDigits > limit.length) return true;
  const whole = digits.slice(0, wholeDigits).padEnd(wholeDigits, '0');
  return whole === limit ? digits.length > wholeDigits : whole > limit;
}

/**
 * The decimal in plain digits ("0.0000001", never "1e-7"). Check the size first: the text
 * has as many characters as the number has digits.
 */
export function plainDecimal({ negative, digits, exponent }: DecimalParts): string {
  if (digits === '') return '0';
  const sign = negative ? '-' : '';
  if (exponent >= 0) return `${sign}${digits}${'0'.repeat(exponent)}`;
  const padded = digits.padStart(1 - exponent, '0');
  return `${sign}${padded.slice(0, exponent)}.${padded.slice(exponent)}`;
}
