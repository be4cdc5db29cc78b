import { randomBytes } from 'node:crypto';
import { formatHostPort } from './address.ts';
import { buildApp } from './app.ts';
import { stopAbandonedAnvil } from './chain/anvil.ts';
import { type SandboxChain, startChain } from './chain/index.ts';
import { createSandboxClock } from './clock.ts';
import type { SandboxOptions } from './options.ts';
import type { App } from './routes/types.ts';
import { openStateDir, reapAbandonedTempDirs } from './state-dir.ts';
import { openStore } from './store/index.ts';

export interface RunningSandbox {
  url: string;
  rpcUrl: string;
  adminToken: string;
  adminTokenGenerated: boolean;
  stateDir: string;
  persistent: boolean;
  app: App;
  close(): Promise<void>;
}

/** Opens the state, builds the app and listens. The caller owns shutdown via close(). */
export async function startSandbox(options: SandboxOptions): Promise<RunningSandbox> {
  reapAbandonedTempDirs(stopAbandonedAnvil);
  const stateDir = openStateDir(options.state);
  let store: ReturnType<typeof openStore> | undefined;
  let chain: SandboxChain | undefined;
  try {
    store = openStore(stateDir.databasePath);
    const clock = createSandboxClock(store.meta);
    chain = await startChain({
      stateDir: stateDir.path,
      persistent: stateDir.persistent,
      clock,
      rpcUrl: options.rpcUrl,
      deploymentFile: options.deploymentFile,
      hasAgents: store.agents.hasAny(),
    });
    const adminToken = options.adminToken ?? randomBytes(24).toString('base64url');
    const app = await buildApp({
      store,
      clock,
      chain,
      adminToken,
      stateDir: stateDir.path,
      persistent: stateDir.persistent,
      rateLimit: options.rateLimit,
      trustProxy: options.trustProxy,
      logger: { level: options.logLevel, stream: process.stderr },
    });
    const openedStore = store;
    const startedChain = chain;
    app.addHook('onClose', async () => {
      await startedChain.close();
      openedStore.close();
      stateDir.release();
    });
    await app.listen({ host: options.host, port: options.port });
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : options.port;
    return {
      url: `http://${formatHostPort(options.host, port)}`,
      rpcUrl: chain.rpcUrl,
      adminToken,
      adminTokenGenerated: options.adminToken === undefined,
      stateDir: stateDir.path,
      persistent: stateDir.persistent,
      app,
      close: () => app.close(),
    };
  } catch (error) {
    await chain?.close();
    store?.close();
    stateDir.release();
    throw error;
  }
}

/**
 * `agentctl serve`: start, print the ready line, and shut down gracefully on SIGINT or
 * SIGTERM (in-flight requests finish, the database closes, a temporary state dir is removed).
 * A second signal exits at once.
 */
export async function serveUntilSignalled(
  options: SandboxOptions,
  print: (line: string) => void,
): Promise<void> {
  const sandbox = await startSandbox(options);
  // Handlers go in before the ready line, so a signal sent on seeing it is always graceful.
  const stopped = new Promise<void>((resolveStopped) => {
    let stopping = false;
    const stop = (signal: NodeJS.Signals) => {
      if (stopping) process.exit(130);
      stopping = true;
      print(`${signal} received, shutting down`);
      sandbox.close().then(resolveStopped, (error: unknown) => {
        sandbox.app.log.error({ err: error }, 'shutdown failed');
        process.exitCode = 1;
        resolveStopped();
      });
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  if (sandbox.adminTokenGenerated) print(`admin token: ${sandbox.adminToken}`);
  print(
    `state: ${sandbox.stateDir} (${sandbox.persistent ? 'persistent' : 'temporary, removed at exit'})`,
  );
  print(`chain: ${sandbox.rpcUrl}`);
  print(`agentctl sandbox listening on ${sandbox.url}`);
  await stopped;
}
