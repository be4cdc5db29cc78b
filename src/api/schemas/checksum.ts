import { keccak_256 } from '@noble/hashes/sha3.js';

/**
 * EIP-55: in a mixed-case address, each letter is upper case exactly when the matching
 * nibble of keccak256(lowercase hex) is 8 or more. (Checked here rather than with viem,
 * which would add a quarter of a second to every CLI command that loads the contract.)
 */
export function hasValidChecksum(address: string): address is `0x${string}` {
  const hex = address.slice(2);
  if (hex === hex.toLowerCase() || hex === hex.toUpperCase()) return true;
  return checksumAddress(address) === address;
}

/** The EIP-55 form of a 0x-prefixed, 40-hex-digit address (any case in). */
export function checksumAddress(address: string): `0x${string}` {
  const lower = address.slice(2).toLowerCase();
  const hash = keccak_256(new TextEncoder().encode(lower));
  let out = '0x';
  for (let i = 0; i < 40; i++) {
    const char = lower[i] as string;
    const nibble = ((hash[i >> 1] as number) >> (i % 2 === 0 ? 4 : 0)) & 0xf;
    out += nibble >= 8 ? char.toUpperCase() : char;
  }
  return out as `0x${string}`;
}
