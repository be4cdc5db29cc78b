import type { Command } from 'commander';
import type { ApiClient } from '../api/client.ts';
import { DEFAULT_BASE_URL } from '../config/keys.ts';
import type { Config, Profile } from '../config/profiles.ts';
import { VERSION } from '../version.ts';
import { CliError, EXIT } from './exit-codes.ts';
import type { Output } from './output.ts';
import type { KeptRegistrations } from './registration.ts';

/** The global flags, as commander parsed them. */
export interface GlobalOptions {
  profile?: string;
  baseUrl?: string;
  apiKey?: string;
  json?: boolean;
  color?: boolean;
  quiet?: boolean;
  verbose?: boolean;
  /** `agentctl data --data-url`. */
  dataUrl?: string;
  /** --idempotency-key: the key of the command's write (checked by the parser). */
  idempotencyKey?: string;
}

/** Where a command writes: the process's streams, or a test's. */
export interface Streams {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

/** The context for a command commander has parsed (its options and every global one). */
export function createContext(command: Command, env: NodeJS.ProcessEnv = process.env) {
  return contextFrom(command.optsWithGlobals<GlobalOptions>(), env);
}

/**
 * What a command may use, built lazily: nothing (the config file, HTTP, colour) is loaded
 * until a command asks for it, so `--help` and `--version` stay fast. Tests build one from
 * plain values and call a command's run() with it, without the binary.
 *
 * Precedence for each setting: flag, then environment variable, then profile, then default.
 */
export function contextFrom(
  globals: GlobalOptions,
  env: NodeJS.ProcessEnv = process.env,
  streams?: Streams,
) {
  // An empty variable counts as unset (CI templates often expand a missing secret to "").
  const fromEnv = (name: string) => (env[name] === '' ? undefined : env[name]);
  const namedProfile = globals.profile ?? fromEnv('AGENTCTL_PROFILE');
  let config: Config | undefined;
  let output: Output | undefined;
  let client: ApiClient | undefined;
  let dataClient: ApiClient | undefined;
  /** Clients that send a given API key (seed files act as several agents), by key. */
  const keyedClients = new Map<string, ApiClient>();
  // Set by the commands that create the profile they are given (register).
  let createsProfile = false;
  /** The URLs a profile's key was withheld from (each is said once). */
  const withheldFrom = new Set<string>();
  const explicitApiKey = () => globals.apiKey ?? fromEnv('AGENTCTL_API_KEY');
  /**
   * A command of several writes (seed) numbers them: the n-th is keyed `${base}:${n}`, with
   * --idempotency-key as the base (else a fresh UUID), so the same run made again sends the
   * same keys. Otherwise the write's key is --idempotency-key as given, else a fresh UUID.
   */
  let numberedKeys: { base: string; count: number } | undefined;
  const nextIdempotencyKey = (): { key: string; rerunKey: string } => {
    if (numberedKeys) {
      numberedKeys.count += 1;
      return {
        key: `${numberedKeys.base}:${numberedKeys.count}`,
        rerunKey: numberedKeys.base,
      };
    }
    const key = globals.idempotencyKey ?? globalThis.crypto.randomUUID();
    return { key, rerunKey: key };
  };

  const context = {
    globals,
    env,
    profileName: namedProfile ?? 'default',
    /**
     * This command makes several writes, keyed `${base}:1`, `${base}:2`, … in the order they
     * are sent (see numberedKeys); the base: --idempotency-key, else a fresh UUID.
     */
    numberWriteKeys(): string {
      numberedKeys ??= {
        base: globals.idempotencyKey ?? globalThis.crypto.randomUUID(),
        count: 0,
      };
      return numberedKeys.base;
    },
    /** This command creates the named profile when it does not exist yet. */
    createsProfile(): void {
      createsProfile = true;
    },
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
    /**
     * The profile's settings. A profile named with --profile or AGENTCTL_PROFILE must exist
     * (a typo would otherwise run against the default sandbox), unless this command creates it.
     */
    async profile(): Promise<Profile> {
      const config = await context.config();
      if (
        namedProfile !== undefined &&
        !createsProfile &&
        !config.profileNames().includes(namedProfile)
      ) {
        const known = config.profileNames();
        throw new CliError(
          `no profile named "${namedProfile}"${known.length ? ` (profiles: ${known.join(', ')})` : ''}; create it with \`agentctl --profile ${namedProfile} config set …\` or \`register\``,
          EXIT.usage,
        );
      }
      return config.get(context.profileName);
    },
    async baseUrl(): Promise<string> {
      // The configuration file is read only when no flag or variable names the service.
      const given = globals.baseUrl ?? fromEnv('AGENTCTL_BASE_URL');
      return given ?? (await context.profile()).base_url ?? DEFAULT_BASE_URL;
    },
    /**
     * The API key in effect, before it is bound to a URL: --api-key, AGENTCTL_API_KEY, else
     * the profile's. Requests go through apiKeyFor(url), which withholds a profile's key from
     * other services.
     */
    async apiKey(): Promise<string | undefined> {
      return explicitApiKey() ?? (await context.profile()).api_key;
    },
    /**
     * The key a request to `url` carries, as gh binds a token to its host. A key given with
     * --api-key or AGENTCTL_API_KEY goes wherever the command goes: the user chose both. A
     * key stored in the profile belongs to the service that issued it: the profile's base URL
     * (the default sandbox's when none is set) and its data URL (the same service's data API).
     * Anywhere else it is withheld, and said so once per URL on stderr.
     */
    async apiKeyFor(url: string): Promise<string | undefined> {
      const bound = await context.keyBinding(url);
      if (bound.issuedFor !== undefined && !withheldFrom.has(url)) {
        withheldFrom.add(url);
        (await context.output()).notice(
          `not sending the API key of profile "${context.profileName}" to ${url}: it was issued for ${bound.issuedFor}; pass --api-key or set AGENTCTL_API_KEY to send a key there`,
        );
      }
      return bound.key;
    },
    /** apiKeyFor without the notice: the key for `url`, or the URL a withheld key belongs to. */
    async keyBinding(url: string): Promise<{ key?: string; issuedFor?: string }> {
      const explicit = explicitApiKey();
      if (explicit !== undefined) return { key: explicit };
      const profile = await context.profile();
      if (profile.api_key === undefined) return {};
      const home = profile.base_url ?? DEFAULT_BASE_URL;
      const homes = [home, profile.data_url].filter((at): at is string => at !== undefined);
      if (homes.some((at) => sameService(at, url))) return { key: profile.api_key };
      return { issuedFor: home };
    },
    async output(): Promise<Output> {
      if (!output) {
        const json = Boolean(globals.json);
        const { createOutput, NO_COLOUR } = await import('./output.ts');
        output = createOutput({
          json,
          quiet: Boolean(globals.quiet),
          verbose: Boolean(globals.verbose),
          ...streams,
          colour: json
            ? NO_COLOUR
            : (await import('./io.ts')).colours(globals.color !== false, env),
        });
      }
      return output;
    },
    async client(): Promise<ApiClient> {
      client ??= await context.makeClient(await context.baseUrl(), 'base URL');
      return client;
    },
    /**
     * The data API's URL: --data-url, AGENTCTL_DATA_URL or the profile's data_url, else the
     * base URL (the sandbox serves both).
     */
    async dataUrl(): Promise<string> {
      const given = globals.dataUrl ?? fromEnv('AGENTCTL_DATA_URL');
      return given ?? (await context.profile()).data_url ?? (await context.baseUrl());
    },
    /** A client of the data API (/v1), at the data URL. */
    async dataClient(): Promise<ApiClient> {
      dataClient ??= await context.makeClient(await context.dataUrl(), 'data URL');
      return dataClient;
    },
    /**
     * A client of the base URL that sends `apiKey`, whatever the flags and the profile hold:
     * for a command that acts as agents it has just registered (sandbox seed).
     */
    async clientWithKey(apiKey: string): Promise<ApiClient> {
      let keyed = keyedClients.get(apiKey);
      if (!keyed) {
        keyed = await context.makeClient(await context.baseUrl(), 'base URL', async () => apiKey);
        keyedClients.set(apiKey, keyed);
      }
      return keyed;
    },
    async makeClient(
      url: string,
      what: string,
      apiKey: () => Promise<string | undefined> = () => context.apiKeyFor(url),
    ): Promise<ApiClient> {
      const { createApiClient } = await import('../api/client.ts');
      const out = await context.output();
      // A profile named explicitly must exist, even when flags supply everything else.
      if (namedProfile !== undefined) await context.profile();
      if (!isHttpUrl(url)) {
        throw new CliError(
          `${what} ${JSON.stringify(url)} must be an http(s) URL, for example http://127.0.0.1:8787`,
          EXIT.usage,
        );
      }
      return createApiClient({
        baseUrl: url,
        apiKey,
        userAgent: `agentctl/${VERSION}`,
        idempotencyKey: nextIdempotencyKey,
        // Remembered in the configuration file: read when a write is sent (for its connection)
        // and when it failed, written once per service.
        keyHonouring: {
          honours: async (origin) => (await context.config()).honoursIdempotencyKeys(origin),
          learned: async (origin) => (await context.config()).rememberIdempotencyKeys(origin),
          forgot: async (origin) => (await context.config()).forgetIdempotencyKeys(origin),
        },
        onExchange: (method, requestUrl, status, ms) =>
          out.debug(`${method} ${requestUrl} → ${status} (${ms} ms)`),
        // Said even without --verbose: a silent wait looks like a hang (see Output.retry).
        onRetry: (reason, wait, write) =>
          out.retry(
            write
              ? `retrying ${write.method} ${write.path} with the same Idempotency-Key in ${wait} ms (${reason}): try ${write.attempt} of ${write.of}`
              : `retrying in ${wait} ms (${reason})`,
          ),
      });
    },
    /**
     * Now, for relative hints ("in 3 h"): the sandbox's clock once one of its answers has
     * carried it, else the wall clock (the live service's).
     */
    nowMs(): number {
      return client?.sandboxNowMs() ?? dataClient?.sandboxNowMs() ?? Date.now();
    },
    /** The client, after checking an API key is configured (exit 4 with a hint otherwise). */
    async authenticatedClient(): Promise<ApiClient> {
      const api = await context.client();
      const bound = await context.keyBinding(api.baseUrl);
      if (bound.issuedFor !== undefined) {
        // Where this URL came from, so that the way back to the key's service is named right.
        const instead =
          globals.baseUrl !== undefined
            ? ', or drop --base-url'
            : fromEnv('AGENTCTL_BASE_URL') !== undefined
              ? ', or unset AGENTCTL_BASE_URL (it names this service)'
              : '';
        throw new CliError(
          `no API key for ${api.baseUrl}: the one in profile "${context.profileName}" was issued for ${bound.issuedFor} and is sent only there; pass --api-key or set AGENTCTL_API_KEY for this service${instead}`,
          EXIT.auth,
        );
      }
      if (!(await api.hasApiKey())) {
        throw new CliError(
          `no API key for profile "${context.profileName}": run \`agentctl register\`, or pass --api-key or set AGENTCTL_API_KEY`,
          EXIT.auth,
        );
      }
      return api;
    },
    /**
     * Where signed registrations wait for their outcome, in the config dir
     * (src/config/pending-registrations.ts), and the lines said of them on stderr.
     */
    async keptRegistrations(): Promise<KeptRegistrations> {
      const { openPendingRegistrations } = await import('../config/pending-registrations.ts');
      const out = await context.output();
      return {
        store: openPendingRegistrations((await context.config()).dir),
        onResend: (text) => out.notice(text),
        onKeepFailed: (text) => out.notice(`warning: ${text}`),
      };
    },
    async keystores() {
      const { openKeystoreDir } = await import('../keystore/store.ts');
      return openKeystoreDir((await context.config()).keystoreDir);
    },
    async close() {
      await client?.close();
      await dataClient?.close();
      for (const keyed of keyedClients.values()) await keyed.close();
    },
  };
  return context;
}
export type Context = ReturnType<typeof createContext>;

/**
 * Whether two URLs name the same service: scheme, host and port (as URL normalises them,
 * so `:80` on http is the same as none) and path, trailing slashes aside.
 */
export function sameService(a: string, b: string): boolean {
  const key = (value: string) => {
    try {
      const url = new URL(value);
      return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
    } catch {
      return value;
    }
  };
  return key(a) === key(b);
}

function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
  } catch {
    return false;
  }
}
