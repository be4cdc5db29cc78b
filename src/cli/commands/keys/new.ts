import { Command } from 'commander';
import { action } from '../../action.ts';
import type { Context } from '../../context.ts';
import { CliError, EXIT } from '../../exit-codes.ts';
import { newKeystorePassword } from '../../prompts.ts';

export interface KeysNewOptions {
  name: string;
  passwordFile?: string;
}

export function keysNewCommand(): Command {
  return new Command('new')
    .description('generate a key and store it encrypted')
    .argument('[name]', 'the keystore name', 'default')
    .option('--password-file <file>', 'read the password from the first line of FILE')
    .addHelpText('after', '\nExample:\n  agentctl keys new trader --password-file ./password.txt')
    .action(
      action((context, command) =>
        run(
          {
            name: command.processedArgs[0] as string,
            passwordFile: command.opts<{ passwordFile?: string }>().passwordFile,
          },
          context,
        ),
      ),
    );
}

export async function run(options: KeysNewOptions, context: Context): Promise<void> {
  const store = await context.keystores();
  store.pathOf(options.name); // a bad name fails before the password is asked
  if (store.exists(options.name)) {
    throw new CliError(
      `a key named ${options.name} already exists; choose another name`,
      EXIT.usage,
    );
  }
  const password = await newKeystorePassword(context.env, options.passwordFile);
  const { generatePrivateKey } = await import('viem/accounts');
  const key = Buffer.from(generatePrivateKey().slice(2), 'hex');
  const out = await context.output();
  // scrypt takes a second or two: say what is happening.
  const entry = await out.progress('encrypting the key', () =>
    store.create(options.name, key, password),
  );
  if (out.json) return out.jsonValue(entry);
  out.print(`created key ${entry.name}: ${entry.address}`);
  out.info(`keystore: ${entry.path}`);
}
