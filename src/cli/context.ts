import type { Command } from 'commander';
import type { ApiClient } from '../api/client.ts';
import type { Config, Profile } from '../config/profiles.ts';
import { VERSION } from '../version.ts';
import { CliError, EXIT } from './exit-codes.ts';
import type { Output } from './output.ts';

/** The global flags, as commander parsed them. */
export interface GlobalOptions {
  profile?: string;
  baseUrl?: string;
  apiKey?: string;
  json?: boolean;
  color?: boolean;
  quiet?: boolean;
  verbose?: boolean;
}

/**
 * What a command may use, built lazily: nothing (the config file, HTTP, colour) is loaded
 * until a command asks for it, so `--help` and `--version` stay fast.
 *
 * Precedence for each setting: flag, then environment variable, then profile, then default.
 */
export function createContext(command: Command, env: NodeJS.ProcessEnv = process.env) {
  const globals = command.optsWithGlobals<GlobalOptions>();
  let config: Config | undefined;
  let output: Output | undefined;
  let client: ApiClient | undefined;

  const context = {
    globals,
    env,
    profileName: globals.profile ?? env.AGENTCTL_PROFILE ?? 'default',
    async config(): Promise<Config> {
      if (!config) {
        const { openConfig } = await import('../config/profiles.ts');
        try {
          config = openConfig(env);
        } catch (error) {
          throw new CliError(
            `cannot read the configuration: ${(error as Error).message}`,
            EXIT.failure,
          );
        }
      }
      return config;
    },
    async profile(): Promise<Profile> {
      return (await context.config()).get(context.profileName);
    },
    async baseUrl(): Promise<string> {
      const { DEFAULT_BASE_URL } = await import('../config/profiles.ts');
      return (
        globals.baseUrl ??
        env.AGENTCTL_BASE_URL ??
        (await context.profile()).base_url ??
        DEFAULT_BASE_URL
      );
    },
    async apiKey(): Promise<string | undefined> {
      return globals.apiKey ?? env.AGENTCTL_API_KEY ?? (await context.profile()).api_key;
    },
    async output(): Promise<Output> {
      if (!output) {
        const [{ createOutput }, { colours }] = await Promise.all([
          import('./output.ts'),
          import('./io.ts'),
        ]);
        output = createOutput({
          json: Boolean(globals.json),
          quiet: Boolean(globals.quiet),
          verbose: Boolean(globals.verbose),
          colour: colours(globals.color !== false, env),
        });
      }
      return output;
    },
    async client(): Promise<ApiClient> {
      if (!client) {
        const { createApiClient } = await import('../api/client.ts');
        const out = await context.output();
        const baseUrl = await context.baseUrl();
        if (!/^https?:\/\//.test(baseUrl)) {
          throw new CliError(`base URL ${baseUrl} must start with http:// or https://`, EXIT.usage);
        }
        client = createApiClient({
          baseUrl,
          apiKey: await context.apiKey(),
          userAgent: `agentctl/${VERSION}`,
          onRetry: (reason, wait) => out.debug(`retrying in ${wait} ms (${reason})`),
        });
      }
      return client;
    },
    /** The client, after checking an API key is configured (exit 4 with a hint otherwise). */
    async authenticatedClient(): Promise<ApiClient> {
      const api = await context.client();
      if (!api.hasApiKey) {
        throw new CliError(
          `no API key for profile "${context.profileName}": run \`agentctl register\`, or pass --api-key or set AGENTCTL_API_KEY`,
          EXIT.auth,
        );
      }
      return api;
    },
    async keystores() {
      const { openKeystoreDir } = await import('../keystore/store.ts');
      return openKeystoreDir((await context.config()).keystoreDir);
    },
    async close() {
      await client?.close();
    },
  };
  return context;
}
export type Context = ReturnType<typeof createContext>;
