import { StartupError } from '../errors.ts';
import { isUnreachable } from './errors.ts';
import { openMnemonic } from './mnemonic.ts';
import { startOwnChain } from './own-chain.ts';
import { connectRemote } from './remote-chain.ts';
import type { ChainOptions, StartedChain } from './sandbox-chain.ts';
import { createKeyring } from './wallets.ts';

export type { Deployment } from './deployment.ts';
export type { ChainLogger } from './local-chain.ts';
export type {
  ChainHooks,
  ChainOptions,
  IndexFollow,
  SandboxChain,
  StartedChain,
} from './sandbox-chain.ts';

/**
 * Starts the sandbox's own chain (restored from its checkpoint and log, or from the genesis
 * checkpoint when new) or connects to `rpcUrl`, and checks that the chain, the database and
 * wallet.mnemonic belong together. Whoever keeps copies of the chain's state (the index) is
 * wired in by the caller, through `hooks` and the answer's `follow`: the chain knows nothing
 * of them.
 */
export async function startChain<Observed>(options: ChainOptions<Observed>): Promise<StartedChain> {
  const keyring = createKeyring(await openMnemonic(options.mnemonic, options.store));
  if (!options.rpcUrl) return startOwnChain(options, keyring);
  try {
    return await connectRemote(options, options.rpcUrl, keyring);
  } catch (error) {
    if (isUnreachable(error)) {
      throw new StartupError(`cannot reach the chain at ${options.rpcUrl}`);
    }
    throw error;
  }
}
