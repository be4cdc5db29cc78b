import Table from 'cli-table3';
import { cellText, fieldLines } from './format.ts';

/** The styles output uses; a chalk instance has them all. */
export interface Colour {
  bold(text: string): string;
  cyan(text: string): string;
  dim(text: string): string;
  yellow(text: string): string;
}

/** No colour, without loading chalk (--json prints nothing that would be coloured). */
export const NO_COLOUR: Colour = {
  bold: (text) => text,
  cyan: (text) => text,
  dim: (text) => text,
  yellow: (text) => text,
};

export interface OutputOptions {
  json: boolean;
  quiet: boolean;
  verbose: boolean;
  colour: Colour;
  stdout?: NodeJS.WritableStream;
  stderr?: NodeJS.WritableStream;
}

/**
 * Data goes to stdout; progress, hints and errors to stderr. With --json, stdout gets the
 * service's body exactly as received (or a local command's own JSON) and nothing else.
 */
export function createOutput(options: OutputOptions) {
  const stdout = options.stdout ?? process.stdout;
  const stderr = options.stderr ?? process.stderr;
  const c = options.colour;
  const line = (stream: NodeJS.WritableStream, text: string): void => {
    stream.write(text.endsWith('\n') ? text : `${text}\n`);
  };

  return {
    json: options.json,
    colour: c,
    /** A service body, byte for byte. */
    raw(text: string) {
      line(stdout, text);
    },
    /** A local command's JSON result: compact, one line, as the service's bodies are. */
    jsonValue(value: unknown) {
      line(stdout, JSON.stringify(value));
    },
    print(text: string) {
      line(stdout, text);
    },
    table(head: string[], rows: Array<Array<string | number | boolean | null | undefined>>) {
      const table = new Table({
        head: head.map((title) => c.bold(title)),
        style: { head: [], border: [] },
      });
      for (const row of rows) table.push(row.map(cellText));
      line(stdout, table.toString());
    },
    /**
     * `key  value` lines, for single objects; nested values as key=value pairs. A value too
     * long for 80 columns wraps, whole (see fieldLines).
     */
    fields(value: Record<string, unknown>) {
      for (const text of fieldLines(value, c.bold)) line(stdout, text);
    },
    /**
     * Any JSON value, for shapes the spec leaves open: its scalar fields as lines, then
     * each array of objects as a table over the union of their keys.
     */
    generic(value: unknown) {
      if (typeof value !== 'object' || value === null) return line(stdout, JSON.stringify(value));
      const entries = Object.entries(value as Record<string, unknown>);
      const scalars = Object.fromEntries(entries.filter(([, field]) => !isObjectArray(field)));
      if (Object.keys(scalars).length > 0) this.fields(scalars);
      for (const [key, field] of entries) {
        if (!isObjectArray(field)) continue;
        if (field.length === 0) {
          line(stdout, `${key}: none`);
          continue;
        }
        line(stdout, c.bold(key));
        const head = [...new Set(field.flatMap((item) => Object.keys(item)))];
        this.table(
          head,
          field.map((item) => head.map((column) => cellText(item[column]))),
        );
      }
    },
    /**
     * A spinner on stderr while `work` runs: only on a terminal, never with --json or
     * --quiet. Elsewhere the message is printed once (unless quiet).
     */
    async progress<T>(text: string, work: () => Promise<T>): Promise<T> {
      const tty = (stderr as NodeJS.WriteStream).isTTY === true;
      if (options.json || options.quiet || !tty) return work();
      const frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
      let frame = 0;
      const draw = () => stderr.write(`\r${c.cyan(frames[frame++ % frames.length] ?? '')} ${text}`);
      // The first frame at once: a quick answer still shows what was being waited for.
      draw();
      const timer = setInterval(draw, 80);
      try {
        return await work();
      } finally {
        clearInterval(timer);
        stderr.write('\r\u001b[K');
      }
    },
    /**
     * A write's answer: the body as received with --json; otherwise `render` when it has
     * the contract's shape, else every field with a warning (the write has happened).
     */
    writeResult<T>(
      response: { text: string; data: unknown; parsed: T | undefined },
      render: (value: T) => void,
    ) {
      if (options.json) return line(stdout, response.text);
      if (response.parsed !== undefined) return render(response.parsed);
      line(
        stderr,
        c.yellow('warning: the answer does not have the documented shape; showing it as sent'),
      );
      this.generic(response.data);
    },
    /** Progress and hints (stderr); silenced by --quiet and by --json. */
    info(text: string) {
      if (!options.quiet && !options.json) line(stderr, text);
    },
    /**
     * Something the user should know while waiting, such as a retry (stderr, prefixed
     * `agentctl:`); silenced only by --quiet, kept with --json (stdout stays clean).
     */
    notice(text: string) {
      if (!options.quiet) line(stderr, `agentctl: ${text}`);
    },
    /**
     * A retry in progress (stderr, prefixed `agentctl:`): a silent wait looks like a hang, so
     * it is said unless --quiet; with --json only with --verbose, so that stderr holds nothing
     * but the one JSON error object when the retries end in a failure.
     */
    retry(text: string) {
      if (!options.quiet && (!options.json || options.verbose)) line(stderr, `agentctl: ${text}`);
    },
    /** Only with --verbose (stderr). */
    debug(text: string) {
      if (options.verbose) line(stderr, c.dim(text));
    },
    error(text: string) {
      line(stderr, text);
    },
  };
}
export type Output = ReturnType<typeof createOutput>;

function isObjectArray(value: unknown): value is Array<Record<string, unknown>> {
  return (
    Array.isArray(value) &&
    value.every((item) => typeof item === 'object' && item !== null && !Array.isArray(item))
  );
}
