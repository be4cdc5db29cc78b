import { type Hex, parseSignature, recoverMessageAddress } from 'viem';

/** Half the secp256k1 group order: canonical (EIP-2) signatures have s at or below it. */
const SECP256K1_HALF_N = 0x7fffffffffffffffffffffffffffffff5d576e73_57a4501ddfe92f46681b20a0n;

/**
 * The EIP-191 signer of `message`, or undefined for a signature that is malformed or
 * malleable (a high-s twin of a valid one).
 */
export async function recoverSigner(message: string, signature: Hex): Promise<string | undefined> {
  let parsed: ReturnType<typeof parseSignature>;
  try {
    parsed = parseSignature(signature);
  } catch {
    return undefined;
  }
  if (BigInt(parsed.s) > SECP256K1_HALF_N) return undefined;
  try {
    return await recoverMessageAddress({ message, signature });
  } catch {
    return undefined;
  }
}
