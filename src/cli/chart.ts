/**
 * A small line of bars for the terminal: a series drawn with the eight block characters, one
 * column per point (or per group of points when there are more points than columns), with
 * its highest and lowest values beside it and, when given, its first and last times under it.
 * No colours, so it reads the same in a log.
 */

const BLOCKS = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

export interface ChartOptions {
  /** Rows of the chart. */
  height?: number;
  /** Columns for the bars (the labels take more). */
  width?: number;
  /**
   * The widest a line may be, labels included: the bars get what the value labels leave
   * (and never more than `width`).
   */
  lineWidth?: number;
  /** How the axis labels show a value. */
  label?: (value: number) => string;
  /** The x axis: labels for the first and the last value (times, oldest first). */
  xLabels?: readonly [string, string];
}

/** The lines of a chart of `values`, oldest left; empty for no values. */
export function chart(values: number[], options: ChartOptions = {}): string[] {
  if (values.length === 0) return [];
  const height = Math.max(1, options.height ?? 8);
  const label = options.label ?? ((value: number) => String(value));
  // The labels are those of the whole series: resampling keeps its extremes' order of size.
  const gutter = Math.max(label(Math.max(...values)).length, label(Math.min(...values)).length);
  const room = options.lineWidth === undefined ? Infinity : options.lineWidth - gutter - 2;
  const width = Math.max(
    1,
    Math.min(options.width ?? (options.lineWidth === undefined ? 60 : room), room),
  );
  const columns = resample(values, width);
  const max = Math.max(...columns);
  const min = Math.min(...columns);
  const span = max - min;
  // A flat series sits at mid height rather than at the floor.
  const levels = columns.map((value) =>
    span === 0
      ? Math.ceil((height * 8) / 2)
      : Math.round(((value - min) / span) * (height * 8 - 1)) + 1,
  );
  const top = label(max);
  const bottom = label(min);
  const lines: string[] = [];
  for (let row = height - 1; row >= 0; row--) {
    const bars = levels
      .map((level) => BLOCKS[Math.max(0, Math.min(8, level - row * 8))] as string)
      .join('');
    const axis = row === height - 1 ? top : row === 0 ? bottom : '';
    lines.push(`${axis.padStart(gutter)} │${bars}`);
  }
  if (options.xLabels) {
    const [first, last] = options.xLabels;
    lines.push(`${' '.repeat(gutter)} └${'─'.repeat(columns.length)}`);
    // The last label ends under the last bar when both fit under the bars, else follows the first.
    const gap = Math.max(1, columns.length - first.length - last.length);
    lines.push(`${' '.repeat(gutter + 2)}${first}${' '.repeat(gap)}${last}`);
  }
  return lines;
}

/** At most `width` values: each column the last value of its group (a state at its end). */
function resample(values: number[], width: number): number[] {
  if (values.length <= width) return values;
  const columns: number[] = [];
  for (let column = 0; column < width; column++) {
    const end = Math.floor(((column + 1) * values.length) / width) - 1;
    columns.push(values[end] as number);
  }
  return columns;
}
