import type { ApiClient, WriteResponse } from '../api/client.ts';
import type { RegisterResponse } from '../api/schemas/index.ts';

/** What signs a registration: a viem account (a keystore's, a private key's, a mnemonic's). */
export interface RegistrationSigner {
  address: string;
  signMessage(args: { message: string }): Promise<string>;
}

/**
 * The registration handshake (`agentctl register`, seed files): a nonce for the wallet, its
 * message signed (EIP-191), and the registration with `fields`. The answer is returned as
 * received: its one-time API key must never be lost to a shape check (see apiKeyOf).
 */
export async function signAndRegister(
  client: ApiClient,
  signer: RegistrationSigner,
  fields: Record<string, unknown>,
): Promise<WriteResponse<RegisterResponse>> {
  const nonce = await client.nonce(signer.address);
  const signature = await signer.signMessage({ message: nonce.data.message });
  return client.register({
    ...fields,
    wallet_address: signer.address,
    nonce: nonce.data.nonce,
    signature,
  });
}

/** The API key in a registration's answer, whatever else its shape; undefined when none. */
export function apiKeyOf(response: { data: unknown }): string | undefined {
  const apiKey = (response.data as { api_key?: unknown } | null)?.api_key;
  return typeof apiKey === 'string' && apiKey !== '' ? apiKey : undefined;
}
