import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Command, Option } from 'commander';
import { SERVE_LOG_FILE as LOG_FILE } from '../../../sandbox/options.ts';
import { action } from '../../action.ts';
import { wholeNumber } from '../../args.ts';
import type { Context } from '../../context.ts';
import { CliError, EXIT } from '../../exit-codes.ts';
import { readFrom, sleep, stateDirOf, stateOf, stateOption } from '../../serve-dir.ts';

export interface LogsOptions {
  /** --state as given; the default directory when undefined. */
  state: string | undefined;
  /** Only the last N lines. */
  lines: number | undefined;
  follow: boolean;
  /** human: readable lines (ISO time, level, message); json: the file's lines as written. */
  format: 'human' | 'json';
  /** How often --follow looks for more (ms). */
  pollMs?: number;
  /** Stops --follow (tests; Ctrl-C otherwise). */
  signal?: AbortSignal;
}

export function logsCommand(): Command {
  return stateOption(
    new Command('logs')
      .description(
        'Print the log of a sandbox started with --detach: its ready lines and its request log, as readable lines on a terminal and as the JSON lines it wrote otherwise.',
      )
      .option('-n, --lines <n>', 'only the last N lines', wholeNumber('--lines', 0, 1e9))
      .option('-f, --follow', 'keep printing new lines until Ctrl-C')
      .addOption(
        new Option(
          '--format <format>',
          'human: time, level and message per line; json: the JSON lines as written (default: human on a terminal, json to a file or pipe, and with --json)',
        ).choices(['human', 'json']),
      )
      .addHelpText(
        'after',
        '\nExamples:\n  agentctl serve logs -n 50\n  agentctl serve logs --follow\n  agentctl serve logs --format json | grep \'"level":50\'   # the errors',
      ),
  ).action(
    action((context, command) => {
      const { lines, follow, format } = command.opts<{
        lines?: number;
        follow?: boolean;
        format?: 'human' | 'json';
      }>();
      return run(
        {
          state: stateOf(command),
          lines,
          follow: follow === true,
          format: format ?? (context.globals.json || !process.stdout.isTTY ? 'json' : 'human'),
        },
        context,
      );
    }),
  );
}

export async function run(options: LogsOptions, context: Context): Promise<void> {
  const path = join(stateDirOf(options.state), LOG_FILE);
  if (!existsSync(path)) {
    throw new CliError(
      `no log at ${path}: only a sandbox started with \`agentctl serve --detach\` writes one`,
      EXIT.usage,
    );
  }
  const out = await context.output();
  const reader = logReader(options.format, out.print);
  let text = readFrom(path, 0);
  let offset = Buffer.byteLength(text);
  if (options.lines !== undefined) {
    const all = text.endsWith('\n') ? text.slice(0, -1).split('\n') : text.split('\n');
    text = options.lines === 0 ? '' : `${all.slice(-options.lines).join('\n')}\n`;
  }
  reader.add(text);
  while (options.follow && !options.signal?.aborted) {
    await sleep(options.pollMs ?? 200);
    const more = readFrom(path, offset);
    offset += Buffer.byteLength(more);
    reader.add(more);
  }
  reader.end();
}

/** Whole lines out of chunks of the file; a line still being written waits for its end. */
function logReader(format: 'human' | 'json', print: (line: string) => void) {
  const readable = readableLines();
  let partial = '';
  const emit = (line: string) => {
    if (format === 'json') return print(line);
    const shown = readable.line(line);
    if (shown !== undefined) print(shown);
  };
  return {
    add(chunk: string) {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) emit(line);
    },
    end() {
      if (partial) emit(partial);
      partial = '';
      if (format === 'human') for (const line of readable.unanswered()) print(line);
    },
  };
}

const LEVEL_NAMES: Record<number, string> = {
  10: 'trace',
  20: 'debug',
  30: 'info',
  40: 'warn',
  50: 'error',
  60: 'fatal',
};

/** Fields every pino line has, or that the readable line already shows. */
const SHOWN_FIELDS = new Set([
  'level',
  'time',
  'pid',
  'hostname',
  'msg',
  'err',
  'reqId',
  'req',
  'res',
  'responseTime',
  'summary',
]);

/** Requests seen coming in but not yet answered, kept to name them in the answer's line. */
const MAX_PENDING_REQUESTS = 1024;

interface LogEntry {
  level?: number;
  time?: number;
  msg?: string;
  reqId?: string;
  req?: { method?: string; url?: string; remoteAddress?: string };
  res?: { statusCode?: number };
  responseTime?: number;
  summary?: string;
  err?: { message?: string };
  [field: string]: unknown;
}

/**
 * serve's JSON log as a person reads it: `2026-11-26T10:00:00.123Z info  GET /health 200 1 ms`.
 * Fastify logs a request twice (coming in, then answered); they become one line, when the
 * answer comes. Lines that are not JSON (the ready block) are shown as they are.
 */
export function readableLines() {
  const pending = new Map<string, { prefix: string; request: string }>();
  return {
    /** The line to show for one line of the file; undefined for a request not answered yet. */
    line(text: string): string | undefined {
      let entry: LogEntry;
      try {
        entry = JSON.parse(text);
      } catch {
        return text;
      }
      if (typeof entry !== 'object' || entry === null) return text;
      const prefix = `${typeof entry.time === 'number' ? new Date(entry.time).toISOString() : '-'} ${(LEVEL_NAMES[entry.level ?? 30] ?? 'info').padEnd(5)}`;
      if (entry.msg === 'incoming request' && entry.reqId !== undefined) {
        if (pending.size >= MAX_PENDING_REQUESTS) {
          pending.delete(pending.keys().next().value as string);
        }
        pending.set(entry.reqId, {
          prefix,
          request: `${entry.req?.method ?? ''} ${entry.req?.url ?? ''}`,
        });
        return undefined;
      }
      if (entry.msg === 'request completed') {
        const incoming = entry.reqId === undefined ? undefined : pending.get(entry.reqId);
        if (entry.reqId !== undefined) pending.delete(entry.reqId);
        const request = incoming?.request ?? `(${entry.reqId})`;
        return `${prefix} ${request} ${entry.res?.statusCode ?? ''} ${Math.round(entry.responseTime ?? 0)} ms`;
      }
      const message = entry.summary ?? entry.msg ?? '';
      const error = entry.err?.message ? `: ${entry.err.message}` : '';
      const extra = Object.entries(entry)
        .filter(
          ([key, value]) => !SHOWN_FIELDS.has(key) && value !== null && typeof value !== 'object',
        )
        .map(([key, value]) => `${key}=${String(value)}`);
      return `${prefix} ${message}${error}${extra.length ? ` (${extra.join(' ')})` : ''}`;
    },
    /** Requests that came in and have no answer in the log (yet). */
    unanswered(): string[] {
      return [...pending.values()].map(
        ({ prefix, request }) => `${prefix} ${request} (no answer logged yet)`,
      );
    },
  };
}
