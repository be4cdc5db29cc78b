/**
 * The contract between the CLI and the service: every request, response,
 * bound and enum. The sandbox validates with these; the client parses with them.
 */
export * from './agents.ts';
export * from './auth.ts';
export * from './common.ts';
export * from './data.ts';
export * from './governance.ts';
export * from './graphql.ts';
export * from './health.ts';
export * from './idempotency.ts';
export * from './numbers.ts';
export * from './sandbox.ts';
export * from './strategies.ts';
export * from './values.ts';
export * from './vaults.ts';
export * from './wallet.ts';
