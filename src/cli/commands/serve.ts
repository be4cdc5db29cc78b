import { Command, InvalidArgumentError, Option } from 'commander';
import {
  DEFAULT_MAX_CONNECTIONS,
  DEFAULT_REQUEST_TIMEOUT_SECONDS,
  GRAPHIQL_MODES,
  type GraphiqlMode,
  LOG_FORMATS,
  LOG_LEVELS,
  type LogFormat,
  type LogLevel,
} from '../../sandbox/options.ts';
import { CliError, EXIT } from '../exit-codes.ts';
import { serveSubcommands } from './serve-control.ts';

interface ServeFlags {
  host: string;
  port: number;
  state?: string;
  adminToken?: string;
  rateLimit: 'on' | 'off';
  trustProxy: boolean;
  logLevel: LogLevel;
  logFormat?: LogFormat;
  rpcUrl?: string;
  deployment?: string;
  maxConnections: number;
  requestTimeout: number;
  graphiql: GraphiqlMode;
  detach?: boolean;
}

function parseRpcUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InvalidArgumentError('must be an http(s) URL, for example http://127.0.0.1:8545');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new InvalidArgumentError('must be an http(s) URL, for example http://127.0.0.1:8545');
  }
  return value;
}

function parsePort(value: string): number {
  const port = Number(value);
  if (!/^\d+$/.test(value) || port > 65535) {
    throw new InvalidArgumentError('must be an integer from 0 to 65535 (0 picks a free port)');
  }
  return port;
}

function parsePositiveInteger(max: number) {
  return (value: string): number => {
    const number = Number(value);
    if (!/^\d+$/.test(value) || number < 1 || number > max) {
      throw new InvalidArgumentError(`must be a whole number from 1 to ${max}`);
    }
    return number;
  };
}

export function serveCommand(): Command {
  const serve = new Command('serve')
    .summary('run the local sandbox of the service')
    .description(
      'Run the local sandbox of the agent service: the same API on one machine, with an admin API under /sandbox.',
    )
    .option('--host <host>', 'interface to listen on', '127.0.0.1')
    .option('--port <port>', 'port to listen on; 0 picks a free port', parsePort, 8787)
    .option(
      '--state <dir>',
      'keep all state in DIR across restarts (default: a temporary directory removed at exit)',
    )
    .addOption(
      new Option(
        '--admin-token <token>',
        'token for the /sandbox admin API (default: generated and printed)',
      ).env('AGENTCTL_ADMIN_TOKEN'),
    )
    .addOption(
      new Option('--rate-limit <mode>', "apply the service's rate limits")
        .choices(['on', 'off'])
        .default('on'),
    )
    .option(
      '--trust-proxy',
      'take the client address from X-Forwarded-For (only behind a proxy you control)',
      false,
    )
    .addOption(
      new Option(
        '--rpc-url <url>',
        'use this node instead of starting anvil; contracts are deployed if it is a dev chain',
      )
        .env('AGENTCTL_RPC_URL')
        .argParser(parseRpcUrl),
    )
    .option(
      '--deployment <file>',
      'contract addresses (JSON, as in /sandbox/info "contracts") on an --rpc-url that is not a dev chain',
    )
    .option(
      '--max-connections <n>',
      'most client connections at once; more are refused (lowered to fit ulimit -n)',
      parsePositiveInteger(1_000_000),
      DEFAULT_MAX_CONNECTIONS,
    )
    .option(
      '--request-timeout <seconds>',
      'time a client has to send a whole request (408 after it)',
      parsePositiveInteger(3600),
      DEFAULT_REQUEST_TIMEOUT_SECONDS,
    )
    .addOption(
      new Option(
        '--graphiql <when>',
        'serve GraphiQL to a browser at GET /graphql: on a loopback --host only, always, or never',
      )
        .choices(GRAPHIQL_MODES)
        .default('loopback'),
    )
    .addOption(
      new Option('--log-level <level>', 'level of the JSON request log on stderr')
        .choices(LOG_LEVELS)
        .default('info'),
    )
    .addOption(
      new Option(
        '--log-format <format>',
        'human: one short line per request; json: JSON lines (default: human on a terminal, json to a file or pipe)',
      ).choices(LOG_FORMATS),
    )
    .option(
      '--detach',
      'run in the background, logging to STATE/serve.log (default --state: ~/.local/state/agentctl/sandbox); stop it with `agentctl serve stop`',
    )
    .addHelpText(
      'after',
      '\nExamples:\n  agentctl serve                                  # temporary state, in the foreground\n  agentctl serve --state ~/.agentctl-sandbox --detach\n  agentctl serve status --state ~/.agentctl-sandbox\n  agentctl serve stop --state ~/.agentctl-sandbox',
    )
    .action(async (flags: ServeFlags) => {
      if (flags.adminToken !== undefined && flags.adminToken.trim() === '') {
        throw new CliError(
          'the admin token (--admin-token or AGENTCTL_ADMIN_TOKEN) is empty: set a value, or unset it to have one generated',
          EXIT.usage,
        );
      }
      const { automaticCheckpoints, CHECKPOINTS_ENV } = await import(
        '../../sandbox/chain/checkpoint-mode.ts'
      );
      if (automaticCheckpoints() === undefined) {
        throw new CliError(
          `${CHECKPOINTS_ENV}=${process.env[CHECKPOINTS_ENV]} is not a checkpoint mode: set it to manual (no automatic checkpoints, for tests and the bench), or unset it`,
          EXIT.usage,
        );
      }
      if (flags.detach) {
        const { detach } = await import('./serve-control.ts');
        return detach(process.argv.slice(2), flags.state);
      }
      const { serveUntilSignalled } = await import('../../sandbox/server.ts');
      const { StartupError } = await import('../../sandbox/errors.ts');
      try {
        await serveUntilSignalled(
          {
            host: flags.host,
            port: flags.port,
            state: flags.state,
            adminToken: flags.adminToken,
            rateLimit: flags.rateLimit === 'on',
            trustProxy: flags.trustProxy,
            logLevel: flags.logLevel,
            logFormat: flags.logFormat ?? (process.stderr.isTTY ? 'human' : 'json'),
            rpcUrl: flags.rpcUrl,
            deploymentFile: flags.deployment,
            maxConnections: flags.maxConnections,
            requestTimeoutMs: flags.requestTimeout * 1000,
            graphiql: flags.graphiql,
          },
          (line) => process.stdout.write(`${line}\n`),
        );
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'EADDRINUSE') {
          throw new CliError(
            `port ${flags.port} on ${flags.host} is already in use: choose another with --port, or --port 0 for a free one`,
            EXIT.failure,
          );
        }
        // Only the listening socket's own errors: an EACCES from a file is a StartupError.
        const syscall = (error as NodeJS.ErrnoException).syscall;
        if ((code === 'EADDRNOTAVAIL' || code === 'EACCES') && syscall === 'listen') {
          throw new CliError(
            `cannot listen on ${flags.host}:${flags.port} (${code})`,
            EXIT.failure,
          );
        }
        if (error instanceof StartupError) throw new CliError(error.message, EXIT.failure);
        throw error;
      }
    });
  for (const subcommand of serveSubcommands()) serve.addCommand(subcommand);
  return serve;
}
