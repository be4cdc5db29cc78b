import type { Command } from 'commander';
import { type Context, createContext } from './context.ts';

/**
 * Wraps a command's run function for commander: builds the lazy context from the parsed
 * command and closes its HTTP client afterwards. `command.processedArgs` holds the
 * arguments and `command.opts()` the command's own options.
 */
export function action(run: (context: Context, command: Command) => Promise<void>) {
  return async (...args: unknown[]) => {
    const command = args.at(-1) as Command;
    const context = createContext(command);
    try {
      await run(context, command);
    } finally {
      await context.close();
    }
  };
}
