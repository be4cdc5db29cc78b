import { Command } from 'commander';
import { AGENT_TYPES } from '../../api/schemas/values.ts';
import { action } from '../action.ts';
import type { Context } from '../context.ts';
import { CliError, EXIT } from '../exit-codes.ts';
import { canPrompt } from '../io.ts';
import { askNewPassword, hiddenPrompt } from '../prompts.ts';

interface RegisterFlags {
  key?: string;
  passwordFile?: string;
  name?: string;
  type?: string;
  description?: string;
  operator?: string;
  operatorEmail?: string;
  operatorName?: string;
  framework?: string;
  repoUrl?: string;
  yes?: boolean;
  force?: boolean;
}

/** The fields of the register body, from the flags (the wizard fills the gaps first). */
function fieldsFrom(flags: RegisterFlags) {
  return Object.fromEntries(
    Object.entries({
      agent_name: flags.name,
      agent_type: flags.type,
      description: flags.description,
      operator_address: flags.operator,
      operator_email: flags.operatorEmail,
      operator_name: flags.operatorName,
      framework: flags.framework,
      repo_url: flags.repoUrl,
    }).filter(([, value]) => value !== undefined && value !== ''),
  );
}

/**
 * The wizard: asks for whatever the flags left out. The key first: an existing keystore,
 * or a new one created on the spot.
 */
async function wizard(
  context: Context,
  flags: RegisterFlags,
): Promise<{ flags: RegisterFlags; newKeyPassword?: string }> {
  let newKeyPassword: string | undefined;
  const { input, select, confirm } = await import('@inquirer/prompts');
  const filled = { ...flags };
  const profile = await context.profile({ mayBeNew: true });
  if (!filled.key && !context.env.AGENTCTL_PRIVATE_KEY && !profile.keystore) {
    const store = await context.keystores();
    const existing = store.list();
    const choice = await select({
      message: 'Which key signs the registration?',
      choices: [
        ...existing.map((entry) => ({
          name: `${entry.name} (${entry.address})`,
          value: entry.name,
        })),
        { name: 'Create a new key', value: '' },
      ],
    });
    if (choice) {
      filled.key = choice;
    } else {
      const name = await input({
        message: 'Name for the new key',
        default: 'default',
        validate: (value) => !store.exists(value) || `a key named ${value} already exists`,
      });
      const password = await askNewPassword();
      const { generatePrivateKey } = await import('viem/accounts');
      const entry = await store.create(
        name,
        Buffer.from(generatePrivateKey().slice(2), 'hex'),
        password,
      );
      process.stderr.write(`Created key ${name}: ${entry.address}\n`);
      filled.key = name;
      filled.passwordFile = undefined;
      newKeyPassword = password;
    }
  }
  filled.name ??= await input({
    message: 'Agent name (3 to 100 characters)',
    validate: (value) => (value.length >= 3 && value.length <= 100) || '3 to 100 characters',
  });
  filled.type ??= filled.yes
    ? undefined
    : await select({
        message: 'Agent type',
        choices: AGENT_TYPES.map((type) => ({ name: type, value: type })),
        default: 'custom',
      });
  const optional = async (message: string) => (filled.yes ? undefined : input({ message }));
  filled.description ??= await optional('Description (optional, at most 500)');
  filled.operator ??= await input({
    message: 'Operator address (the human or organisation controlling the agent)',
    validate: (value) => /^0x[0-9a-fA-F]{40}$/.test(value) || '0x followed by 40 hex digits',
  });
  filled.operatorEmail ??= await optional('Operator e-mail (optional)');
  filled.operatorName ??= await optional('Operator name (optional)');
  filled.framework ??= await optional('Framework, e.g. langchain, eliza (optional)');
  filled.repoUrl ??= await optional('Public repository URL (optional)');
  if (!filled.yes && !(await confirm({ message: `Register ${filled.name}?`, default: true }))) {
    throw new CliError('cancelled', EXIT.cancelled);
  }
  return { flags: filled, newKeyPassword };
}

export function registerCommand(): Command {
  return new Command('register')
    .summary('register an agent and store its API key')
    .description(
      'Register a wallet as an agent: get a nonce, sign it (EIP-191) with your key, submit, and store the one-time API key in the profile. On a terminal a wizard asks for what the flags leave out; in scripts, give --name and --operator (and a key).',
    )
    .option('--key <name>', "keystore that signs (else AGENTCTL_PRIVATE_KEY, else the profile's)")
    .option('--password-file <file>', 'keystore password from the first line of FILE')
    .option('--name <name>', 'agent name, 3 to 100 characters')
    .option('--type <type>', AGENT_TYPES.join(' | '))
    .option('--description <text>', 'at most 500 characters')
    .option('--operator <address>', 'wallet of the human or organisation controlling the agent')
    .option('--operator-email <email>', 'operator contact e-mail')
    .option('--operator-name <name>', 'operator display name')
    .option('--framework <name>', 'agent framework, e.g. langchain, autogen, crewai, eliza')
    .option('--repo-url <url>', 'public repository URL')
    .option('-y, --yes', 'do not ask for confirmation, nor for the optional fields')
    .option('--force', 'replace the API key the profile already holds')
    .addHelpText(
      'after',
      '\nExamples:\n  agentctl register                       # the wizard\n  AGENTCTL_KEYSTORE_PASSWORD=… agentctl register --key trader --name "Trend Bot" --operator 0xYourOperator --type trading --yes',
    )
    .action(
      action(async (context, command) => {
        let flags = command.opts<RegisterFlags>();
        let newKeyPassword: string | undefined;
        if (canPrompt()) ({ flags, newKeyPassword } = await wizard(context, flags));
        const fields = fieldsFrom(flags);
        const missing = [
          fields.agent_name === undefined ? '--name' : undefined,
          fields.operator_address === undefined ? '--operator' : undefined,
        ].filter(Boolean);
        if (missing.length > 0) throw new CliError(`missing ${missing.join(' and ')}`, EXIT.usage);
        // Every field is checked with the shared schema before the key is unlocked.
        const { RegisterRequest, describeZodError } = await import('../../api/schemas/index.ts');
        const placeholder = {
          wallet_address: '0x0000000000000000000000000000000000000000',
          signature: `0x${'0'.repeat(130)}`,
          nonce: '0'.repeat(64),
        };
        const checked = RegisterRequest.safeParse({ ...placeholder, ...fields });
        if (!checked.success)
          throw new CliError(describeZodError(checked.error, 'registration'), EXIT.usage);

        const profile = await context.profile({ mayBeNew: true });
        if (profile.api_key && !flags.force) {
          throw new CliError(
            `profile "${context.profileName}" already holds an API key; register into another profile (--profile NAME), or pass --force to replace it`,
            EXIT.usage,
          );
        }
        const { resolveSigner } = await import('../../keystore/signer.ts');
        const signer = await resolveSigner({
          keyName: flags.key,
          profileKeystore: profile.keystore,
          // The key the wizard just made is unlocked with the password just typed.
          env: newKeyPassword ? {} : context.env,
          passwordFile: flags.passwordFile,
          keystores: await context.keystores(),
          askPassword: newKeyPassword ? async () => newKeyPassword : hiddenPrompt(),
        });
        const wallet = signer.account.address;
        const client = await context.client();
        const out = await context.output();
        const nonce = await client.nonce(wallet);
        const signature = await signer.account.signMessage({ message: nonce.data.message });
        const response = await client.register({
          ...fields,
          wallet_address: wallet,
          nonce: nonce.data.nonce,
          signature,
        });
        // The key is shown once: print the body first with --json, and never drop the key.
        if (out.json) out.raw(response.text);
        const apiKey = (response.data as { api_key?: unknown } | null)?.api_key;
        if (typeof apiKey !== 'string' || apiKey === '') {
          if (!out.json) out.generic(response.data);
          throw new CliError(
            'the service answered without an api_key; nothing was stored',
            EXIT.failure,
          );
        }
        const config = await context.config();
        try {
          config.set(context.profileName, {
            api_key: apiKey,
            wallet_address: wallet,
            base_url: client.baseUrl,
          });
          if (signer.keystore) config.set(context.profileName, { keystore: signer.keystore });
          else config.unset(context.profileName, 'keystore');
        } catch (error) {
          // Losing a one-time key is worse than showing it: say it once, on stderr.
          out.error(
            `warning: could not store the API key (${(error as Error).message}); it is ${apiKey}`,
          );
          throw new CliError('registered, but the API key could not be stored', EXIT.failure);
        }
        if (!out.json) {
          out.writeResult(response, (result) =>
            out.print(
              `registered ${result.agent_name} (${wallet}) as agent ${result.agent_id}, tier ${result.tier}`,
            ),
          );
        }
        out.info(
          `API key ${apiKey.slice(0, 12)}… stored in profile "${context.profileName}" (${config.path})`,
        );
      }),
    );
}

export function whoamiCommand(): Command {
  return new Command('whoami')
    .summary("registration lookup of the profile's wallet")
    .description("Look up the registration of the profile's wallet (set by `agentctl register`).")
    .addHelpText('after', '\nExample:\n  agentctl --profile live whoami')
    .action(
      action(async (context) => {
        const profile = await context.profile();
        if (!profile.wallet_address) {
          throw new CliError(
            `profile "${context.profileName}" has no wallet: run \`agentctl register\` (or \`agentctl config set wallet_address\`)`,
            EXIT.usage,
          );
        }
        const response = await (await context.client()).lookup(profile.wallet_address);
        const out = await context.output();
        if (out.json) return out.raw(response.text);
        out.fields({
          profile: context.profileName,
          wallet: profile.wallet_address,
          ...response.data,
        });
      }),
    );
}
