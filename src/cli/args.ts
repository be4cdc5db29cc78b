import { InvalidArgumentError } from 'commander';
import { VAULT_IDS } from '../api/schemas/values.ts';
import { CliError, EXIT } from './exit-codes.ts';
import { didYouMean } from './suggest.ts';

/**
 * The argument parsers commands share: each checks one kind of value as typed and throws a
 * usage error (exit 2) in the same words wherever it is used. Commands import these, never
 * each other.
 */

/** A vault id as the service knows it: any case, and a near miss gets a suggestion. */
export function vaultId(value: string): string {
  const id = value.toLowerCase();
  if ((VAULT_IDS as readonly string[]).includes(id)) return id;
  throw new CliError(
    `vault ${value}: must be one of ${VAULT_IDS.join(', ')}${didYouMean(id, VAULT_IDS)}`,
    EXIT.usage,
  );
}

/**
 * A decimal number as typed, normalised for JSON: "12.5", ".5" and "1e3" are accepted;
 * a sign, a comma or a word is not.
 */
export function decimalText(name: string, value: string): string {
  if (!/^(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(value)) {
    throw new CliError(
      `${name} ${value}: must be a positive number, for example 100, 12.5, .5 or 1e3`,
      EXIT.usage,
    );
  }
  return value.replace(/^\./, '0.').replace(/\.(?=$|[eE])/, '');
}

/** A USDC amount as raw units (6 decimals), exactly. */
export function usdcToRaw(name: string, value: string): string {
  const text = decimalText(name, value);
  const match = /^(\d+)(?:\.(\d{1,6}))?$/.exec(text);
  if (!match) {
    throw new CliError(
      `${name} ${value}: at most 6 decimals, for example 1000 or 12.5`,
      EXIT.usage,
    );
  }
  return BigInt(`${match[1]}${(match[2] ?? '').padEnd(6, '0')}`).toString();
}

/** A commander option parser for a whole number in [min, max]. */
export const wholeNumber = (name: string, min: number, max: number) => (value: string) => {
  if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new InvalidArgumentError(`${name} must be a whole number from ${min} to ${max}`);
  }
  return Number(value);
};

/**
 * Checks an address with the shared schema before any request (exit 2 when it is wrong).
 * Loaded lazily: the schema pulls in viem, which --help must not load.
 */
export async function checkAddress(name: string, value: string): Promise<string> {
  const { Address } = await import('../api/schemas/index.ts');
  const parsed = Address.safeParse(value);
  if (!parsed.success) {
    throw new CliError(`${name} ${value}: ${parsed.error.issues[0]?.message}`, EXIT.usage);
  }
  return parsed.data;
}

/** A commander option parser for a count: a whole number, at least 1, with no upper bound. */
export function positiveCount(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1) {
    throw new InvalidArgumentError('must be a whole number, at least 1');
  }
  return Number(value);
}
