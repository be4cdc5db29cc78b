import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Command, Option } from 'commander';
import { SERVE_LOG_FILE as LOG_FILE, LOG_LEVEL_NAMES } from '../../../sandbox/options.ts';
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
  /** human: readable lines (ISO time, level, message); json: JSON lines (plain ones wrapped). */
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
        'Print the log of a sandbox started with --detach: its ready lines and its request log, as readable lines on a terminal and as JSON lines otherwise.',
      )
      .option('-n, --lines <n>', 'only the last N lines', wholeNumber('--lines', 0, 1e9))
      .option('-f, --follow', 'keep printing new lines until Ctrl-C')
      .addOption(
        new Option(
          '--format <format>',
          'human: time, level and message per line; json: one JSON object per line, as written, plain lines as {"msg": …} (default: human on a terminal, json to a file or pipe, and with --json)',
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
    if (format === 'json') {
      if (line.trim()) print(asJsonLine(line));
      return;
    }
    for (const shown of readable.line(line)) print(shown);
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

/**
 * A line of the file as a JSON line: pino's lines as written; a plain line (the ready block,
 * which serve prints to stdout, and anything else not JSON) as `{"msg":"<the line>"}`, with
 * no time (the file gives it none).
 */
export function asJsonLine(line: string): string {
  try {
    const parsed: unknown = JSON.parse(line);
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) return line;
  } catch {
    // Not JSON: wrapped below.
  }
  return JSON.stringify({ msg: line });
}

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
 * serve's JSON log as a person reads it: `2026-11-26T10:00:00.123Z info  GET /health 200 1 ms`,
 * in the file's (time) order. Fastify logs a request twice (coming in, then answered): a
 * request answered before any other line is logged is one line, at its answer. One still
 * unanswered when another line comes (a slow request, requests in parallel, a WebSocket
 * upgrade, which is never answered in the log) is shown where it came in,
 * `GET /graphql (came in, not answered yet)`, and its answer, if it comes, where it comes:
 * `GET /x 200 1500 ms (came in at …)`. Lines that are not JSON (the ready block) are shown
 * as they are.
 */
export function readableLines() {
  /** Requests seen coming in, not yet answered: `shown` once their arrival is printed. */
  const pending = new Map<
    string,
    { time: string; prefix: string; request: string; shown: boolean }
  >();
  /** The arrival lines of requests not shown yet, which must come before any later line. */
  const arrivals = (): string[] => {
    const lines: string[] = [];
    for (const request of pending.values()) {
      if (request.shown) continue;
      request.shown = true;
      lines.push(`${request.prefix} ${request.request} (came in, not answered yet)`);
    }
    return lines;
  };
  return {
    /** The lines to show for one line of the file, in order (none for a request just come in). */
    line(text: string): string[] {
      let entry: LogEntry;
      try {
        entry = JSON.parse(text);
      } catch {
        return [...arrivals(), text];
      }
      if (typeof entry !== 'object' || entry === null) return [...arrivals(), text];
      const time = typeof entry.time === 'number' ? new Date(entry.time).toISOString() : '-';
      const prefix = `${time} ${(LOG_LEVEL_NAMES[entry.level ?? 30] ?? 'info').padEnd(5)}`;
      if (entry.msg === 'incoming request' && entry.reqId !== undefined) {
        const before = arrivals();
        if (pending.size >= MAX_PENDING_REQUESTS) {
          pending.delete(pending.keys().next().value as string);
        }
        pending.set(entry.reqId, {
          time,
          prefix,
          request: `${entry.req?.method ?? ''} ${entry.req?.url ?? ''}`,
          shown: false,
        });
        return before;
      }
      if (entry.msg === 'request completed') {
        const incoming = entry.reqId === undefined ? undefined : pending.get(entry.reqId);
        if (entry.reqId !== undefined) pending.delete(entry.reqId);
        const before = arrivals();
        const request = incoming?.request ?? `(${entry.reqId})`;
        const cameIn = incoming?.shown ? ` (came in at ${incoming.time})` : '';
        return [
          ...before,
          `${prefix} ${request} ${entry.res?.statusCode ?? ''} ${Math.round(entry.responseTime ?? 0)} ms${cameIn}`,
        ];
      }
      const message = entry.summary ?? entry.msg ?? '';
      const error = entry.err?.message ? `: ${entry.err.message}` : '';
      const extra = Object.entries(entry)
        .filter(
          ([key, value]) => !SHOWN_FIELDS.has(key) && value !== null && typeof value !== 'object',
        )
        .map(([key, value]) => `${key}=${String(value)}`);
      return [
        ...arrivals(),
        `${prefix} ${message}${error}${extra.length ? ` (${extra.join(' ')})` : ''}`,
      ];
    },
    /** At the end of the log: the arrivals of requests not shown yet (no answer logged). */
    unanswered(): string[] {
      return arrivals();
    },
  };
}
