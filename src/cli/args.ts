import { InvalidArgumentError } from 'commander';
import { type DecimalParts, decimalParts, plainDecimal } from '../api/schemas/numbers.ts';
import { VAULT_IDS } from '../api/schemas/values.ts';
import { PROFILE_KEYS, type ProfileKey } from '../config/keys.ts';
import { CliError, EXIT } from './exit-codes.ts';
import { suggesting } from './suggest.ts';

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
    suggesting(
      (suggest) =>
        `vault ${value}: must be one of ${VAULT_IDS.join(', ')}${suggest(id, VAULT_IDS)}`,
    ),
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

/** JSON.rawJSON (Node 21 and later; not yet in TypeScript's lib). */
const { rawJSON } = JSON as unknown as { rawJSON(text: string): unknown };

/**
 * A decimal argument as a JSON number written digit for digit: Number() would round
 * 0.123456789012345678 ETH, which the service takes exactly.
 */
export function exactJsonNumber(name: string, value: string): unknown {
  const parts = decimalParts(decimalText(name, value)) as DecimalParts;
  // Before writing the digits out: 1e999999 would be a million characters.
  if (parts.digits.length + parts.exponent > 30) {
    throw new CliError(`${name} ${value}: is far too large`, EXIT.usage);
  }
  return rawJSON(plainDecimal(parts));
}

/** A commander option parser for a TCP port; 0 asks the system for a free one. */
export function port(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) > 65535) {
    throw new InvalidArgumentError('must be an integer from 0 to 65535 (0 picks a free port)');
  }
  return Number(value);
}

/** A commander option parser for an http(s) URL. */
export function httpUrl(example: string) {
  return (value: string): string => {
    let url: URL | undefined;
    try {
      url = new URL(value);
    } catch {
      // Said below.
    }
    if (url?.protocol !== 'http:' && url?.protocol !== 'https:') {
      throw new InvalidArgumentError(`must be an http(s) URL, for example ${example}`);
    }
    return value;
  };
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

/** A profile setting's name (`config get|set|unset`); a near miss gets a suggestion. */
export function profileKey(value: string): ProfileKey {
  if ((PROFILE_KEYS as readonly string[]).includes(value)) return value as ProfileKey;
  throw new CliError(
    suggesting(
      (suggest) =>
        `no setting named ${value}: the settings are ${PROFILE_KEYS.join(', ')}${suggest(value, PROFILE_KEYS)}`,
    ),
    EXIT.usage,
  );
}

/** A commander option parser for a count: a whole number, at least 1, with no upper bound. */
export function positiveCount(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1) {
    throw new InvalidArgumentError('must be a whole number, at least 1');
  }
  return Number(value);
}

/**
 * A snapshot's name (`sandbox snapshot|restore|snapshot-delete|export`), checked with the
 * contract's SnapshotName before any request. Loaded lazily, as checkAddress is.
 */
export async function checkSnapshotName(value: string): Promise<string> {
  const { SnapshotName } = await import('../api/schemas/sandbox.ts');
  const parsed = SnapshotName.safeParse(value);
  if (!parsed.success) {
    throw new CliError(
      `snapshot name ${JSON.stringify(value)}: ${parsed.error.issues[0]?.message}`,
      EXIT.usage,
    );
  }
  return parsed.data;
}
