import type { Command } from 'commander';
import { graphqlCommand } from './graphql.ts';
import { requestCommand } from './request.ts';

/** `agentctl api`: a raw call itself (./request.ts), and `api graphql`. */
export function apiCommand(): Command {
  return requestCommand().addCommand(graphqlCommand());
}
