import { Command, Option } from 'commander';
import {
  DEFAULT_MAX_CONNECTIONS,
  DEFAULT_REQUEST_TIMEOUT_SECONDS,
  GRAPHIQL_MODES,
  type GraphiqlMode,
  LOG_FORMATS,
  LOG_LEVELS,
  type LogFormat,
  type LogLevel,
} from '../../../sandbox/options.ts';
import { httpUrl, port, wholeNumber } from '../../args.ts';
import { logsCommand } from './logs.ts';
import { run } from './start.ts';
import { statusCommand } from './status.ts';
import { stopCommand } from './stop.ts';

interface ServeFlags {
  host: string;
  port: number;
  state?: string;
  database?: string;
  replica?: boolean;
  advertiseUrl?: string;
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
  from?: string;
}

/** `agentctl serve` (its start lives in start.ts) and its subcommands stop, status and logs. */
export function serveCommand(): Command {
  const serve = new Command('serve')
    .summary('run the local sandbox of the service')
    .description(
      'Run the local sandbox of the agent service: the same API on one machine, with an admin API under /sandbox.',
    )
    .option('--host <host>', 'interface to listen on', '127.0.0.1')
    .option('--port <port>', 'port to listen on; 0 picks a free port', port, 8787)
    .option(
      '--state <dir>',
      'keep all state in DIR across restarts (default: a temporary directory removed at exit)',
    )
    .addOption(
      new Option(
        '--database <url>',
        "keep the whole sandbox in PostgreSQL (postgres://USER@HOST:PORT/DB), no state dir: a team sandbox's writer (see docs/team-sandbox.md)",
      ).env('AGENTCTL_DATABASE_URL'),
    )
    .option(
      '--replica',
      'with --database: a read replica of that team sandbox (no chain, no state; writes forwarded to its writer)',
    )
    .addOption(
      // Checked by serve itself (start.ts), whose refusal does not repeat a password in it.
      new Option(
        '--advertise-url <url>',
        "with --database: the URL replicas forward writes to (default: http://HOST:PORT, the machine's name for 0.0.0.0)",
      ),
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
        .argParser(httpUrl('http://127.0.0.1:8545')),
    )
    .option(
      '--deployment <file>',
      'contract addresses (JSON, as in /sandbox/info "contracts") on an --rpc-url that is not a dev chain',
    )
    .option(
      '--max-connections <n>',
      'most client connections at once; more are refused (lowered to fit ulimit -n)',
      wholeNumber('--max-connections', 1, 1_000_000),
      DEFAULT_MAX_CONNECTIONS,
    )
    .option(
      '--request-timeout <seconds>',
      'time a client has to send a whole request (408 after it)',
      wholeNumber('--request-timeout', 1, 3600),
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
      '--from <file>',
      'start from a file of `agentctl sandbox export`: a new temporary sandbox, or with --state a new state dir (refused when the dir is not empty)',
    )
    .option(
      '--detach',
      'run in the background, logging to STATE/serve.log (default --state: ~/.local/state/agentctl/sandbox, where --from puts a temporary sandbox); stop it with `agentctl serve stop`',
    )
    .addHelpText(
      'after',
      '\nOutput: the ready block (admin token, state, chain, and last "agentctl sandbox\nlistening on URL") on stdout; the request log and notices on stderr.\n\nExamples:\n  agentctl serve                     # temporary state, in the foreground\n  agentctl serve --state ~/.agentctl-sandbox --detach\n  agentctl serve --from fixtures/base.sandbox --detach\n  agentctl serve --database postgres://me@db:5432/sandbox   # a team sandbox\n  agentctl serve --replica --database postgres://me@db:5432/sandbox\n  agentctl serve status --state ~/.agentctl-sandbox\n  agentctl serve stop --state ~/.agentctl-sandbox',
    )
    // Not action(): serve needs no client, and runs until a signal.
    .action(async (flags: ServeFlags, command: Command) => {
      const { createContext } = await import('../../context.ts');
      await run(
        {
          host: flags.host,
          port: flags.port,
          state: flags.state,
          ...(flags.database !== undefined && {
            database: flags.database,
            databaseFromEnv: command.getOptionValueSource('database') === 'env',
          }),
          ...(flags.replica === true && { replica: true }),
          ...(flags.advertiseUrl !== undefined && { advertiseUrl: flags.advertiseUrl }),
          adminToken: flags.adminToken,
          rateLimit: flags.rateLimit === 'on',
          trustProxy: flags.trustProxy,
          logLevel: flags.logLevel,
          logFormat: flags.logFormat ?? (process.stderr.isTTY ? 'human' : 'json'),
          rpcUrl: flags.rpcUrl,
          deploymentFile: flags.deployment,
          fromFile: flags.from,
          maxConnections: flags.maxConnections,
          requestTimeoutMs: flags.requestTimeout * 1000,
          graphiql: flags.graphiql,
          detach: flags.detach === true,
          argv: process.argv.slice(2),
        },
        createContext(command),
      );
    });
  for (const subcommand of [stopCommand(), statusCommand(), logsCommand()]) {
    serve.addCommand(subcommand);
  }
  return serve;
}
