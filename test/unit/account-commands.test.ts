import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { profileKey } from '../../src/cli/args.ts';
import { run as configList } from '../../src/cli/commands/config/list.ts';
import { run as configSet } from '../../src/cli/commands/config/set.ts';
import { run as faucet } from '../../src/cli/commands/faucet.ts';
import { run as keysImport } from '../../src/cli/commands/keys/import.ts';
import { run as register } from '../../src/cli/commands/register.ts';
import { run as wallet } from '../../src/cli/commands/wallet.ts';
import { run as whoami } from '../../src/cli/commands/whoami.ts';
import type { GlobalOptions } from '../../src/cli/context.ts';
import { openConfig, type Profile } from '../../src/config/profiles.ts';
import { openKeystoreDir } from '../../src/keystore/store.ts';
import {
  type Canned,
  type CannedServer,
  cannedServer,
  capturedContext,
  sandboxTime,
} from '../helpers/run-context.ts';

const servers: CannedServer[] = [];
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A service answering each "METHOD /path" with its canned answer (404 otherwise). */
async function service(routes: Record<string, Canned>): Promise<string> {
  const server = await cannedServer(routes);
  servers.push(server);
  return server.url;
}

/** A context for run(), over a fresh config dir holding `profile` as "default". */
async function contextWith(
  globals: GlobalOptions,
  profile: Profile = {},
  env: NodeJS.ProcessEnv = {},
) {
  const dir = mkdtempSync(join(tmpdir(), 'agentctl-account-'));
  dirs.push(dir);
  await openConfig({ AGENTCTL_CONFIG_DIR: dir }).set('default', profile);
  const { context, text } = capturedContext(globals, { AGENTCTL_CONFIG_DIR: dir, ...env });
  return {
    context,
    dir,
    stdout: { text: () => text.stdout },
    stderr: { text: () => text.stderr },
  };
}

const WALLET = {
  configured: true,
  agent_address: '0x684c869Ae8eB27341835e3D2829EB1Cfc8f206b2',
  network: 'Base Sepolia',
  chain_id: 84532,
  eth_balance: '1',
  eth_balance_wei: '1000000000000000000',
  has_gas: true,
  usdc_balance: 10000,
  usdc_balance_raw: '10000000000',
  protocol_token_balance: '100',
  positions: [
    {
      vault_id: 'moderate',
      vault_address: '0x0000000000000000000000000000000000000001',
      vault_name: 'Moderate Vault',
      shares: '200',
      value_usdc: '200.5',
    },
  ],
};

describe('wallet', () => {
  it('labels every field and puts a unit on every amount', async () => {
    const url = await service({ 'GET /api/v1/agent/wallet': { body: WALLET } });
    const { context, stdout } = await contextWith({ baseUrl: url, apiKey: 'agk_test' });
    await wallet({}, context);
    await context.close();
    const text = stdout.text();
    expect(text).toMatch(/^ETH\s+1 ETH \(1000000000000000000 wei\)$/m);
    expect(text).toMatch(/^USDC\s+10000 USDC \(10000000000 raw\)$/m);
    expect(text).toMatch(/^network\s+Base Sepolia \(chain id 84532\)$/m);
    // The positions table fits 80 columns without the raw units; --wide adds them.
    expect(text).toMatch(/│ 200 shares +│ 200\.5 USDC +│/);
    expect(text).not.toMatch(/eth_balance|usdc_balance|value_usdc|vault_address/);
    const wide = await contextWith({ baseUrl: url, apiKey: 'agk_test' });
    await wallet({ wide: true }, wide.context);
    await wide.context.close();
    expect(wide.stdout.text()).toContain('200 shares (200000000 raw)');
    expect(wide.stdout.text()).toContain('200.5 USDC (200500000 raw)');
  });
});

describe('times carry a hint from the service clock', () => {
  const sandboxNow = 1_800_000_000;

  it("whoami's registration time", async () => {
    const wallet = '0xC45a0e213960d2DfaFe83B3E62b0984D990059C6';
    const url = await service({
      'GET /api/v1/agent/auth/lookup': {
        headers: sandboxTime(sandboxNow),
        body: {
          registered: true,
          agent_name: 'Clock Bot',
          tier: 'unverified',
          status: 'active',
          strategies_submitted: 0,
          performance_score: 0,
          api_key_prefix: 'agk_12345678',
          created_at: new Date((sandboxNow - 2 * 86_400) * 1000).toISOString(),
        },
      },
    });
    const { context, stdout } = await contextWith({ baseUrl: url }, { wallet_address: wallet });
    await whoami({}, context);
    await context.close();
    expect(stdout.text()).toMatch(/^created_at\s+2027-01-13T08:00:00Z \(2 d ago\)$/m);
  });

  it("the faucet's next time, during its cooldown", async () => {
    const next = sandboxNow + 3 * 3600;
    const url = await service({
      'POST /api/v1/agent/faucet': {
        status: 429,
        headers: sandboxTime(sandboxNow),
        body: {
          success: false,
          agent_address: WALLET.agent_address,
          error: 'the faucet is cooling down for this agent',
          next_eligible_timestamp: next,
          seconds_remaining: 3 * 3600,
        },
      },
    });
    const { context } = await contextWith({ baseUrl: url, apiKey: 'agk_test' });
    const failure = faucet({}, context);
    await expect(failure).rejects.toThrow(
      'the faucet is cooling down for this agent: ask again after 2027-01-15T11:00:00Z (in 3 h)',
    );
    await expect(failure).rejects.toMatchObject({ exitCode: 5, code: 'cooldown' });
    await context.close();
  });
});

describe('messages in our voice', () => {
  it('an unknown setting names the settings, with a did-you-mean', () => {
    expect(() => profileKey('basee_url')).toThrow(
      'no setting named basee_url: the settings are base_url, data_url, wallet_address, keystore, api_key (did you mean base_url?)',
    );
    expect(profileKey('data_url')).toBe('data_url');
  });

  it('register --type names the valid types, with a did-you-mean', async () => {
    const { context } = await contextWith({ baseUrl: 'http://127.0.0.1:9' });
    await expect(register({ name: 'Typed Bot', type: 'tradng' }, context)).rejects.toThrow(
      '--type tradng: must be one of trading, governance, analytics, custom, quant, cfo, research (did you mean trading?)',
    );
    const failure = register({ name: 'Typed Bot', type: 'foo' }, context);
    await expect(failure).rejects.toThrow(/^--type foo: must be one of trading, .*research$/);
    await expect(failure).rejects.not.toThrow(/Invalid option/);
  });

  it('a missing key file is named, with what it should hold', async () => {
    const { context, dir } = await contextWith({});
    const missing = join(dir, 'key.txt');
    await expect(keysImport({ name: 'old', privateKeyFile: missing }, context)).rejects.toThrow(
      `--private-key-file ${missing}: no such file; give the path of a file that holds the private key (64 hex digits, 0x optional)`,
    );
  });
});

describe('register checks the service before it unlocks the key', () => {
  it('a service that is down is said before the keystore is opened', async () => {
    const { context, dir } = await contextWith(
      { baseUrl: 'http://127.0.0.1:9' },
      {},
      // A wrong password: unlocking first would fail with it (exit 4), not with the service.
      { AGENTCTL_KEYSTORE_PASSWORD: 'not the password' },
    );
    await openKeystoreDir(join(dir, 'keystores')).create(
      'signer',
      Buffer.alloc(32, 7),
      'the right password',
    );
    const failure = register({ name: 'Down Bot', key: 'signer', yes: true }, context);
    await expect(failure).rejects.toThrow('cannot reach http://127.0.0.1:9');
    await context.close();
  }, 30_000);
});

describe('config set api_key binds the key to the service named for it', () => {
  it('keeps the --base-url it was set under as the profile base_url', async () => {
    const { context, dir, stderr } = await contextWith(
      { baseUrl: 'https://agents.example.org' },
      { base_url: 'http://127.0.0.1:8787' },
    );
    await configSet({ key: 'api_key', value: `agk_${'c'.repeat(64)}` }, context);
    expect(openConfig({ AGENTCTL_CONFIG_DIR: dir }).get('default')).toMatchObject({
      base_url: 'https://agents.example.org',
      api_key: `agk_${'c'.repeat(64)}`,
    });
    expect(stderr.text()).toContain('the key is sent only to https://agents.example.org');
  });

  it('says where a held key goes once base_url changes', async () => {
    const { context, stderr } = await contextWith(
      {},
      { base_url: 'http://127.0.0.1:8787', api_key: `agk_${'d'.repeat(64)}` },
    );
    await configSet({ key: 'base_url', value: 'http://127.0.0.1:8790' }, context);
    expect(stderr.text()).toContain(
      "the profile's API key now goes to http://127.0.0.1:8790 (it went to http://127.0.0.1:8787)",
    );
  });

  it('config list marks a profile key the URL in effect would not get', async () => {
    const { context, stdout } = await contextWith(
      { baseUrl: 'http://127.0.0.1:8790', json: true },
      { base_url: 'http://127.0.0.1:8787', api_key: `agk_${'d'.repeat(64)}` },
    );
    await configList({}, context);
    expect(JSON.parse(stdout.text()).sources.api_key).toBe(
      'profile (not sent: issued for http://127.0.0.1:8787)',
    );
  });
});
