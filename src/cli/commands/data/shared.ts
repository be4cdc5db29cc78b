import { VAULT_IDS } from '../../../api/schemas/values.ts';
import { checkAddress, vaultId } from '../../args.ts';
import type { Context } from '../../context.ts';
import { CliError, EXIT } from '../../exit-codes.ts';
import { rawToDecimal, rawWithAmount, shortAddress, timeWithHint } from '../../format.ts';

/**
 * What the `data` verbs share, and only they: resolving a vault or a wallet, and the way their
 * human tables show amounts, percentages, times and vaults. A table fits 80 columns: addresses
 * are shortened, vaults shown by id, amounts without their raw units; `--wide` shows every
 * value whole, and `--json` the body as received. The option itself, clip() and TABLE_WIDTH
 * live in format.ts, since every command's tables share them.
 */

export const percent = (value: number) => `${Number(value.toFixed(4))} %`;

/** "12.5 USDC (12500000 raw)": fields and --wide tables. */
export const usdc = (raw: string) => rawWithAmount(raw, 'USDC');

/** "12.5 USDC": narrow tables. */
export const usdcShort = (raw: string) => `${rawToDecimal(raw)} USDC`;

/** A signed raw amount (pnl), in either form. */
export function signedUsdc(raw: string, wide: boolean): string {
  const negative = raw.startsWith('-');
  const magnitude = negative ? raw.slice(1) : raw;
  return `${negative ? '-' : ''}${wide ? usdc(magnitude) : usdcShort(magnitude)}`;
}

/** "2026-11-23T07:00:00Z (in 23 h)" for an ISO time from the data API; other text as it is. */
export function timeText(iso: string | null, nowMs: number): string {
  if (iso === null) return '';
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? iso : timeWithHint(ms / 1000, nowMs);
}

/**
 * A time in a narrow table: the same text as timeText, the hint on a second line, so that the
 * column is as wide as the time alone.
 */
export function timeCell(iso: string | null, nowMs: number): string {
  return timeText(iso, nowMs).replace(' (', '\n(');
}

/** The vault id (moderate, …) the data API's name for a vault stands for, if any. */
export function vaultIdOf(name: string): string | undefined {
  const lower = name.toLowerCase();
  return VAULT_IDS.find((id) => lower.includes(id));
}

/**
 * How a narrow table names a vault: its id when the data API's list names it, else the
 * shortened address.
 */
export async function vaultNamer(context: Context): Promise<(address: string) => string> {
  const listed = (await (await context.dataClient()).data.vaults()).data.vaults;
  const ids = new Map(
    listed.map((vault) => [vault.address.toLowerCase(), vaultIdOf(vault.name)] as const),
  );
  return (address) => ids.get(address.toLowerCase()) ?? shortAddress(address);
}

/** A vault address, or a vault id (conservative, …) looked up in the data API's list by name. */
export async function vaultAddress(context: Context, value: string): Promise<string> {
  if (value.startsWith('0x')) return checkAddress('vault', value);
  // Any case; an unknown id is refused with the ids, and a near miss gets a suggestion.
  const id = vaultId(value);
  const listed = (await (await context.dataClient()).data.vaults()).data.vaults;
  const found = listed.find((vault) => vaultIdOf(vault.name) === id);
  if (!found) {
    throw new CliError(
      `vault ${value}: the data API lists no vault named for it; give the vault's address`,
      EXIT.usage,
    );
  }
  return found.address;
}

/** An address given, or the agent's server-side wallet (needs the profile's API key). */
export async function userAddress(context: Context, given: string | undefined): Promise<string> {
  if (given !== undefined) return checkAddress('address', given);
  const client = await context.client();
  if (!(await client.hasApiKey())) {
    throw new CliError(
      `no address given and no API key for profile "${context.profileName}" to find the agent's wallet: give an address, or run \`agentctl register\``,
      EXIT.usage,
    );
  }
  return (await (await context.authenticatedClient()).wallet()).data.agent_address;
}
