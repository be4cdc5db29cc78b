import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { action } from '../action.ts';
import type { Context } from '../context.ts';
import { CliError, EXIT } from '../exit-codes.ts';
import { askNewPassword, confirmUnlessYes, hiddenPrompt } from '../prompts.ts';
import { canPrompt } from '../tty.ts';

interface PasswordFlags {
  passwordFile?: string;
}

/** The password for a new keystore: --password-file, AGENTCTL_KEYSTORE_PASSWORD, or typed twice. */
async function newPassword(context: Context, flags: PasswordFlags): Promise<string> {
  const { keystorePassword } = await import('../../keystore/signer.ts');
  const password = await keystorePassword(
    {
      env: context.env,
      passwordFile: flags.passwordFile,
      askPassword: canPrompt() ? () => askNewPassword() : undefined,
    },
    'New keystore password',
  );
  if (password.length < 8) {
    throw new CliError('the keystore password must be at least 8 characters', EXIT.usage);
  }
  return password;
}

async function keystores(context: Context) {
  const { openKeystoreDir } = await import('../../keystore/store.ts');
  return openKeystoreDir((await context.config()).keystoreDir);
}

async function report(
  context: Context,
  entry: { name: string; address: string; path: string },
  verb: string,
) {
  const out = await context.output();
  if (out.json) return out.jsonValue(entry);
  out.print(`${verb} key ${entry.name}: ${entry.address}`);
  out.info(`keystore: ${entry.path}`);
}

export function keysCommand(): Command {
  const keys = new Command('keys')
    .summary('local encrypted keystores')
    .description(
      'Signing keys, kept as Web3 Secret Storage v3 files (scrypt) in <config dir>/keystores, mode 0600. Passwords come from a hidden prompt, --password-file or AGENTCTL_KEYSTORE_PASSWORD. Private keys and passwords are never printed.',
    )
    .addHelpText(
      'after',
      '\nExamples:\n  agentctl keys new trader\n  agentctl keys list\n  agentctl keys import old --private-key-file ./key.txt',
    );
  keys
    .command('new')
    .description('generate a key and store it encrypted')
    .argument('[name]', 'the keystore name', 'default')
    .option('--password-file <file>', 'read the password from the first line of FILE')
    .addHelpText('after', '\nExample:\n  agentctl keys new trader --password-file ./password.txt')
    .action(
      action(async (context, command) => {
        const name = command.processedArgs[0] as string;
        const store = await keystores(context);
        store.pathOf(name); // a bad name fails before the password is asked
        if (store.exists(name))
          throw new CliError(`a key named ${name} already exists; choose another name`, EXIT.usage);
        const password = await newPassword(context, command.opts<PasswordFlags>());
        const { generatePrivateKey } = await import('viem/accounts');
        const key = Buffer.from(generatePrivateKey().slice(2), 'hex');
        await report(context, await store.create(name, key, password), 'created');
      }),
    );
  keys
    .command('import')
    .description('store an existing private key encrypted')
    .argument('<name>', 'the keystore name')
    .option(
      '--private-key-file <file>',
      'read the private key from FILE (else a hidden prompt, else AGENTCTL_PRIVATE_KEY)',
    )
    .option('--password-file <file>', 'read the password from the first line of FILE')
    .addHelpText(
      'after',
      '\nExample:\n  agentctl keys import trader   # asks for the key and a password',
    )
    .action(
      action(async (context, command) => {
        const name = command.processedArgs[0] as string;
        const flags = command.opts<PasswordFlags & { privateKeyFile?: string }>();
        const store = await keystores(context);
        store.pathOf(name);
        if (store.exists(name))
          throw new CliError(`a key named ${name} already exists; choose another name`, EXIT.usage);
        let raw: string | undefined;
        if (flags.privateKeyFile) {
          try {
            raw = readFileSync(flags.privateKeyFile, 'utf8').trim();
          } catch (error) {
            throw new CliError(
              `--private-key-file ${flags.privateKeyFile}: ${(error as NodeJS.ErrnoException).code}`,
              EXIT.usage,
            );
          }
        } else if (canPrompt()) {
          raw = await hiddenPrompt()?.('Private key (hex)');
        } else {
          raw = context.env.AGENTCTL_PRIVATE_KEY;
        }
        const key = raw?.trim().replace(/^0x/, '');
        if (!key || !/^[0-9a-fA-F]{64}$/.test(key)) {
          throw new CliError(
            raw
              ? 'the private key must be 32 bytes: 64 hex digits, 0x optional'
              : 'no private key: use --private-key-file, a terminal, or AGENTCTL_PRIVATE_KEY',
            EXIT.usage,
          );
        }
        const password = await newPassword(context, flags);
        await report(
          context,
          await store.create(name, Buffer.from(key, 'hex'), password),
          'imported',
        );
      }),
    );
  keys
    .command('list')
    .description('list the keystores')
    .addHelpText('after', '\nExample:\n  agentctl keys list --json')
    .action(
      action(async (context) => {
        const entries = (await keystores(context)).list();
        const out = await context.output();
        if (out.json) return out.jsonValue(entries);
        if (entries.length === 0) return out.print('no keys: create one with `agentctl keys new`');
        out.table(
          ['name', 'address', 'path'],
          entries.map((e) => [e.name, e.address, e.path]),
        );
      }),
    );
  keys
    .command('address')
    .description("print a keystore's address (no password needed)")
    .argument('<name>', 'the keystore name')
    .addHelpText('after', '\nExample:\n  agentctl keys address trader')
    .action(
      action(async (context, command) => {
        const name = command.processedArgs[0] as string;
        const store = await keystores(context);
        const address = store.address(name);
        const out = await context.output();
        if (out.json) return out.jsonValue({ name, address, path: store.pathOf(name) });
        out.print(address);
      }),
    );
  keys
    .command('remove')
    .description('delete a keystore (asks first on a terminal; needs --yes otherwise)')
    .argument('<name>', 'the keystore name')
    .option('-y, --yes', 'do not ask')
    .addHelpText('after', '\nExample:\n  agentctl keys remove old-key --yes')
    .action(
      action(async (context, command) => {
        const name = command.processedArgs[0] as string;
        const { yes } = command.opts<{ yes?: boolean }>();
        const store = await keystores(context);
        const address = store.address(name);
        if (!yes && !canPrompt()) {
          throw new CliError(`removing key ${name} cannot be undone: pass --yes`, EXIT.usage);
        }
        await confirmUnlessYes(`Delete key ${name} (${address})? This cannot be undone.`, yes);
        store.remove(name);
        const out = await context.output();
        if (out.json) return out.jsonValue({ name, address, removed: true });
        out.info(`removed key ${name}`);
      }),
    );
  return keys;
}
