import { Command } from 'commander';
import { AGENT_TYPES } from '../../api/schemas/values.ts';
import { action } from '../action.ts';
import type { Context } from '../context.ts';
import { CliError, EXIT } from '../exit-codes.ts';
import type { Output } from '../output.ts';
import { askNewPassword, askText, hiddenPrompt } from '../prompts.ts';
import { didYouMean } from '../suggest.ts';
import { canPrompt } from '../tty.ts';

/** What `agentctl register` is given: its flags (the wizard fills the gaps on a terminal). */
export interface RegisterOptions {
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
function fieldsFrom(flags: RegisterOptions): Record<string, string> {
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
    }).filter((entry): entry is [string, string] => entry[1] !== undefined && entry[1] !== ''),
  );
}

/** The flag that sets each register field, for messages. */
const FLAG_OF: Record<string, string> = {
  agent_name: '--name',
  agent_type: '--type',
  description: '--description',
  operator_address: '--operator',
  operator_email: '--operator-email',
  operator_name: '--operator-name',
  framework: '--framework',
  repo_url: '--repo-url',
};

type Field = keyof typeof FLAG_OF;

/** The shared schema's verdict on one field: true, or the rule it breaks (for a prompt). */
async function fieldRule(field: Field): Promise<(value: string) => true | string> {
  const { RegisterRequest } = await import('../../api/schemas/index.ts');
  const schema = RegisterRequest.shape[field as keyof typeof RegisterRequest.shape];
  return (value) => {
    const result = schema.safeParse(value);
    return result.success || (result.error.issues[0]?.message ?? 'invalid');
  };
}

/**
 * Picks the key in the wizard when nothing else names one: an existing keystore, or a new
 * one created on the spot (its name checked at the prompt).
 */
async function chooseKey(context: Context): Promise<{ key: string; password?: string }> {
  const { select } = await import('@inquirer/prompts');
  const { KEY_NAME } = await import('../../keystore/store.ts');
  const store = await context.keystores();
  const existing = store.list();
  const choice = await select({
    message: 'Which key signs the registration?',
    choices: [
      ...existing.map((entry) => ({ name: `${entry.name} (${entry.address})`, value: entry.name })),
      { name: 'Create a new key', value: '' },
    ],
  });
  if (choice) return { key: choice };
  const name = await askText({
    message: 'Name for the new key',
    default: 'default',
    validate: (value) =>
      !KEY_NAME.test(value)
        ? 'use letters, digits, dot, dash or underscore (at most 64), starting with a letter or digit'
        : !store.exists(value) || `a key named ${value} already exists`,
  });
  const password = await askNewPassword();
  const { generatePrivateKey } = await import('viem/accounts');
  const out = await context.output();
  // scrypt takes a second or two: say what is happening.
  const entry = await out.progress('encrypting the new key', () =>
    store.create(name, Buffer.from(generatePrivateKey().slice(2), 'hex'), password),
  );
  out.info(`Created key ${name}: ${entry.address}`);
  return { key: name, password };
}

/** The wizard's questions, for what the flags left out; each answer is checked as it is typed. */
async function askFields(flags: RegisterOptions, signer: string): Promise<RegisterOptions> {
  const { select } = await import('@inquirer/prompts');
  const filled = { ...flags };
  const ask = async (
    field: Field,
    message: string,
    options: { optional?: boolean; default?: string } = {},
  ) => {
    const rule = await fieldRule(field);
    return askText({
      message,
      ...(options.default !== undefined && { default: options.default }),
      validate: (value) => (options.optional && value === '') || rule(value),
    });
  };
  const optional = (field: Field, message: string) =>
    filled.yes ? undefined : ask(field, `${message} (optional)`, { optional: true });
  filled.name ??= await ask('agent_name', 'Agent name (3 to 100 characters)');
  filled.type ??= filled.yes
    ? undefined
    : await select({
        message: 'Agent type',
        choices: AGENT_TYPES.map((type) => ({ name: type, value: type })),
        default: 'custom',
      });
  filled.description ??= await optional('description', 'Description, at most 500 characters');
  filled.operator ??= await ask(
    'operator_address',
    'Operator address (the human or organisation controlling the agent)',
    { default: signer },
  );
  filled.operatorEmail ??= await optional('operator_email', 'Operator e-mail');
  filled.operatorName ??= await optional('operator_name', 'Operator name');
  filled.framework ??= await optional('framework', 'Framework, e.g. langchain, eliza');
  filled.repoUrl ??= await optional('repo_url', 'Public repository URL');
  return filled;
}

/** Every field's rule at once, so a script learns all its mistakes in one run. */
async function checkFields(fields: Record<string, string>): Promise<void> {
  const { RegisterRequest } = await import('../../api/schemas/index.ts');
  const placeholder = {
    wallet_address: '0x0000000000000000000000000000000000000000',
    signature: `0x${'0'.repeat(130)}`,
    nonce: '0'.repeat(64),
    agent_name: 'placeholder',
    operator_address: '0x0000000000000000000000000000000000000000',
  };
  const checked = RegisterRequest.safeParse({ ...placeholder, ...fields });
  if (!checked.success) {
    const problems = checked.error.issues.map((issue) => {
      const field = String(issue.path[0]);
      // The schema's enum message names the values in its own words; say it in ours.
      if (field === 'agent_type') {
        const given = fields.agent_type ?? '';
        return `--type ${given}: must be one of ${AGENT_TYPES.join(', ')}${didYouMean(given, AGENT_TYPES)}`;
      }
      return `${FLAG_OF[field] ?? field}: ${issue.message}`;
    });
    throw new CliError(problems.join('; '), EXIT.usage);
  }
}

export function registerCommand(): Command {
  return new Command('register')
    .summary('register an agent and store its API key')
    .description(
      'Register a wallet as an agent: get a nonce, sign it (EIP-191) with your key, submit, and store the one-time API key in the profile (created if new), bound to the service that issued it. On a terminal a wizard asks for what the flags leave out; in scripts, give --name (and a key). The operator defaults to the signing wallet.',
    )
    .option('--key <name>', "keystore that signs (else AGENTCTL_PRIVATE_KEY, else the profile's)")
    .option('--password-file <file>', 'keystore password from the first line of FILE')
    .option('--name <name>', 'agent name, 3 to 100 characters')
    .option('--type <type>', AGENT_TYPES.join(' | '))
    .option('--description <text>', 'at most 500 characters')
    .option(
      '--operator <address>',
      'wallet of the human or organisation controlling the agent (default: the signing wallet)',
    )
    .option('--operator-email <email>', 'operator contact e-mail')
    .option('--operator-name <name>', 'operator display name')
    .option('--framework <name>', 'agent framework, e.g. langchain, autogen, crewai, eliza')
    .option('--repo-url <url>', 'public repository URL')
    .option('-y, --yes', 'do not ask for confirmation, nor for the optional fields')
    .option('--force', 'replace the API key the profile already holds')
    .addHelpText(
      'after',
      '\nExamples:\n  agentctl register                       # the wizard\n  AGENTCTL_KEYSTORE_PASSWORD=… agentctl register --key trader \\\n    --name "Trend Bot" --type trading --yes\n  agentctl --profile second register      # a second agent, in a new profile',
    )
    .action(action((context, command) => run(command.opts<RegisterOptions>(), context)));
}

export async function run(options: RegisterOptions, context: Context): Promise<void> {
  context.createsProfile();
  let flags = options;
  const prompting = canPrompt();
  // What can be refused without the key or the network is refused first.
  const profile = await context.profile();
  if (profile.api_key && !flags.force) {
    throw new CliError(
      `profile "${context.profileName}" already holds an API key; register into another profile (--profile NAME), or pass --force to replace it`,
      EXIT.usage,
    );
  }
  await checkFields(fieldsFrom(flags));
  if (!prompting && flags.name === undefined) throw new CliError('missing --name', EXIT.usage);
  const client = await context.client();
  const out = await context.output();
  // Then the service: a password typed (or a key unlocked) for a service that is down, or for
  // a web server that is not the service, is wasted. /health must answer as an agentctl
  // service does (its shape, even when degraded); any other error of the service's own (a
  // rate limit, say) lets the registration say the rest.
  await out.progress(`checking ${client.baseUrl}`, async () => {
    const { ApiError, NOT_JSON_ANSWER, UnexpectedResponseError, UnreachableError } = await import(
      '../../api/errors.ts'
    );
    await client.health().catch((error: unknown) => {
      if (error instanceof UnreachableError || error instanceof UnexpectedResponseError) {
        throw error;
      }
      if (!(error instanceof ApiError)) throw error;
      if (error.message.startsWith(NOT_JSON_ANSWER)) throw error;
      if (error.status === 404) {
        throw new CliError(
          `${client.baseUrl} answers GET /health with 404: is this an agentctl service? check --base-url`,
          EXIT.usage,
        );
      }
    });
  });

  let newKeyPassword: string | undefined;
  if (prompting && !flags.key && !context.env.AGENTCTL_PRIVATE_KEY && !profile.keystore) {
    const chosen = await chooseKey(context);
    flags = { ...flags, key: chosen.key };
    newKeyPassword = chosen.password;
  }
  const { resolveSigner } = await import('../../keystore/signer.ts');
  const signer = await resolveSigner({
    keyName: flags.key,
    profileKeystore: profile.keystore,
    // The key the wizard just made is unlocked with the password just typed.
    env: newKeyPassword ? {} : context.env,
    passwordFile: newKeyPassword ? undefined : flags.passwordFile,
    keystores: await context.keystores(),
    askPassword: newKeyPassword ? async () => newKeyPassword : hiddenPrompt(),
    // scrypt takes a second or two: a spinner on a terminal says what is happening.
    unlocking: (name, work) => out.progress(`unlocking key ${name}`, work),
  });
  const wallet = signer.account.address;
  const { apiKeyOf, prepareRegistration, sendRegistration } = await import('../registration.ts');
  const kept = await context.keptRegistrations();
  // An earlier run's registration kept under --idempotency-key, its outcome unknown: sent
  // again as it was, so that the service answers what it did (the API key included).
  const prepared = prepareRegistration(client, wallet, kept);
  let fields: Record<string, string>;
  if (prepared.kept) {
    fields = {};
    refuseOtherFields(flags, prepared.kept.body, wallet);
  } else {
    // Before any question: a wallet registers once.
    const known = await client.lookup(wallet);
    if (known.data.registered) {
      throw new CliError(
        `wallet ${wallet} is already registered, as ${known.data.agent_name}; register another key, or store this agent's API key with \`agentctl config set api_key\``,
        EXIT.usage,
        'conflict',
      );
    }
    if (prompting) flags = await askFields(flags, wallet);
    fields = { operator_address: wallet, ...fieldsFrom(flags) };
    await checkFields(fields);
    if (prompting && !flags.yes) {
      const { confirm } = await import('@inquirer/prompts');
      const go = await confirm({
        message: `Register ${fields.agent_name} with wallet ${wallet} on ${client.baseUrl} (profile ${context.profileName})?`,
        default: true,
      });
      if (!go) throw new CliError('cancelled', EXIT.cancelled);
    }
  }

  const response = await sendRegistration(client, prepared, signer.account, fields, kept);
  // The key is shown once: print the body first with --json, and never drop the key.
  if (out.json) out.raw(response.text);
  const apiKey = apiKeyOf(response);
  if (apiKey === undefined) {
    if (!out.json) out.generic(response.data);
    throw new CliError('the service answered without an api_key; nothing was stored', EXIT.failure);
  }
  const config = await context.config();
  try {
    await config.set(context.profileName, {
      api_key: apiKey,
      wallet_address: wallet,
      // The key is bound to this service: it is sent only here (and to the profile's data_url).
      base_url: client.baseUrl,
    });
    if (signer.keystore) await config.set(context.profileName, { keystore: signer.keystore });
    else await config.unset(context.profileName, 'keystore');
  } catch (error) {
    // Losing a one-time key is worse than showing it: say it once, on stderr.
    out.error(
      `warning: could not store the API key (${(error as Error).message}); it is ${apiKey}`,
    );
    throw new CliError('registered, but the API key could not be stored', EXIT.failure);
  }
  if (!out.json) await reportRegistration(out, response, wallet, client);
  out.info(
    `API key ${apiKey.slice(0, 12)}… stored in profile "${context.profileName}" (${config.path})`,
  );
}

/**
 * A rerun sends the registration kept under its key as it was: fields given on the rerun that
 * differ from it are refused (exit 2) rather than silently not sent.
 */
function refuseOtherFields(
  flags: RegisterOptions,
  kept: Record<string, unknown>,
  wallet: string,
): void {
  const differing = Object.entries(fieldsFrom(flags))
    .filter(([field, value]) => kept[field] !== value)
    .map(([field]) => FLAG_OF[field] ?? field);
  if (differing.length > 0) {
    throw new CliError(
      `the registration of ${wallet} kept for this --idempotency-key has another ${differing.join(', ')}: it is sent again as it was, so run the command with the same values (or without them)`,
      EXIT.usage,
    );
  }
}

type Client = Awaited<ReturnType<Context['client']>>;

async function reportRegistration(
  out: Output,
  response: Awaited<ReturnType<Client['register']>>,
  wallet: string,
  client: Client,
): Promise<void> {
  out.writeResult(response, (result) =>
    out.print(
      `registered ${result.agent_name} (${wallet}) as agent ${result.agent_id}, tier ${result.tier}`,
    ),
  );
  // The wallet the agent will act from, which the service holds (and funds in a sandbox).
  const agentWallet = await client.wallet().then(
    (answer) => answer.data.agent_address,
    () => undefined,
  );
  if (agentWallet) {
    out.print(
      `its server-side wallet is ${agentWallet}: deposits, strategies and votes come from it`,
    );
  }
}
