// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these strings are shell code, not templates
import type { Command } from 'commander';
import { AGENT_TYPES, STRATEGY_STATUSES, TIERS, VAULT_IDS } from '../api/schemas/values.ts';
import { PROFILE_KEYS } from '../config/keys.ts';

export const SHELLS = ['bash', 'zsh', 'fish'] as const;
export type Shell = (typeof SHELLS)[number];

interface Node {
  /** Space-separated command path below the root, "" for the root. */
  path: string;
  subcommands: Array<{ name: string; summary: string }>;
  options: Array<{ flag: string; description: string; values?: Values }>;
}

/**
 * What completes a value: a fixed list, the profile, key or snapshot names known right now
 * (asked of `agentctl completion --values`; snapshots of the sandbox, which prints nothing
 * when it does not answer), file names, or nothing (free text: no guess is better than a file
 * name).
 */
type Values = readonly string[] | Dynamic | '@files' | '@none';
/** The names `agentctl completion --values KIND` prints, for each dynamic kind. */
export const DYNAMIC_VALUES = ['profiles', 'keys', 'snapshots'] as const;
type Dynamic = `@${(typeof DYNAMIC_VALUES)[number]}`;
const isDynamic = (values: Values): values is Dynamic =>
  typeof values === 'string' && (DYNAMIC_VALUES as readonly string[]).includes(values.slice(1));

/** Values of options, by flag, where the option's own choices do not say. */
const OPTION_VALUES: Record<string, Values> = {
  '--profile': '@profiles',
  '--key': '@keys',
  '--type': AGENT_TYPES,
  '--file': '@files',
  '--password-file': '@files',
  '--private-key-file': '@files',
  '--state': '@files',
  '--deployment': '@files',
  '--from': '@files',
  '--out': '@files',
};

/** Values of positional arguments, by command path, in order. */
const ARGUMENT_VALUES: Record<string, Values[]> = {
  deposit: [VAULT_IDS, '@none'],
  vote: ['@none', ['for', 'against', 'abstain'], '@none'],
  'config get': [PROFILE_KEYS],
  'config set': [PROFILE_KEYS, '@none'],
  'config unset': [PROFILE_KEYS],
  completion: [SHELLS],
  'keys address': ['@keys'],
  'keys remove': ['@keys'],
  'keys new': ['@none'],
  'keys import': ['@none'],
  'sandbox tier': ['@none', TIERS],
  'sandbox strategy-status': ['@none', STRATEGY_STATUSES],
  'sandbox restore': ['@snapshots'],
  'sandbox snapshot-delete': ['@snapshots'],
  'sandbox export': ['@snapshots', '@files'],
  // A new name: nothing to offer (not file names either).
  'sandbox snapshot': ['@none'],
};

/** Shell words for `values`: a list, or a command substitution for the dynamic ones. */
function valueWords(values: Values): string {
  if (isDynamic(values)) {
    return `$(command agentctl completion --values ${values.slice(1)} 2>/dev/null)`;
  }
  if (values === '@files' || values === '@none') return values;
  return values.join(' ');
}

/** Every command of the tree with its subcommands and long options, root first. */
function walk(command: Command, path = ''): Node[] {
  const node: Node = {
    path,
    subcommands: command.commands.map((sub) => ({
      name: sub.name(),
      summary: sub.summary() || sub.description(),
    })),
    options: [
      ...command.options
        .filter((option) => option.long && !option.negate)
        .map((option) => ({
          flag: option.long as string,
          description: option.description,
          ...((option.required || option.optional) && {
            values: option.argChoices ?? OPTION_VALUES[option.long as string] ?? '@none',
          }),
        })),
      ...command.options
        .filter((option) => option.long && option.negate)
        .map((option) => ({ flag: option.long as string, description: option.description })),
      { flag: '--help', description: 'show help' },
    ],
  };
  return [
    node,
    ...command.commands.flatMap((sub) => walk(sub, path ? `${path} ${sub.name()}` : sub.name())),
  ];
}

/** The shell functions bash and zsh share: a command path's subcommands and options. */
function tables(nodes: Node[], globals: string[]): string {
  const subcommands = nodes
    .filter((node) => node.subcommands.length > 0)
    .map(
      (node) => `    "${node.path}") echo "${node.subcommands.map((s) => s.name).join(' ')}" ;;`,
    );
  const options = nodes.map((node) => {
    const flags =
      node.path === ''
        ? node.options.map((o) => o.flag)
        : [...node.options.map((o) => o.flag), ...globals];
    return `    "${node.path}") echo "${[...new Set(flags)].join(' ')}" ;;`;
  });
  // Options that take a value, with what completes it, by command path (the same flag may
  // take other values elsewhere: register --type, data transactions --type); the global
  // options, last, apply everywhere.
  const specific: string[] = [];
  const global: string[] = [];
  for (const node of nodes) {
    for (const option of node.options) {
      if (!option.values) continue;
      const words = valueWords(option.values);
      if (node.path === '') global.push(`    *:${option.flag}) echo "${words}" ;;`);
      else specific.push(`    "${node.path}:${option.flag}") echo "${words}" ;;`);
    }
  }
  const optionValues = [...specific, ...global];
  const argumentValues = Object.entries(ARGUMENT_VALUES).flatMap(([path, list]) =>
    list.map((values, index) => `    "${path}:${index}") echo "${valueWords(values)}" ;;`),
  );
  return [
    '_agentctl_subcommands() {',
    '  case "$1" in',
    ...subcommands,
    '  esac',
    '}',
    '',
    '_agentctl_options() {',
    '  case "$1" in',
    ...options,
    '  esac',
    '}',
    '',
    '# What completes the value of option $2 of command path $1; fails for an option that takes none.',
    '_agentctl_option_values() {',
    '  case "$1:$2" in',
    ...optionValues,
    '    *) return 1 ;;',
    '  esac',
    '}',
    '',
    '# What completes positional argument $2 (from 0) of command path $1.',
    '_agentctl_argument_values() {',
    '  case "$1:$2" in',
    ...argumentValues,
    '    *) echo "@files" ;;',
    '  esac',
    '}',
  ].join('\n');
}

/** The completion script for `shell`, generated from the command tree. */
export function completionScript(shell: Shell, program: Command): string {
  const nodes = walk(program);
  const root = nodes[0] as Node;
  const globals = root.options
    .map((o) => o.flag)
    .filter((flag) => flag !== '--help' && flag !== '--version');
  const header = `# ${shell} completion for agentctl. Generated by \`agentctl completion ${shell}\`; do not edit.`;
  if (shell === 'bash') {
    return `${[
      header,
      '# Install: source it from ~/.bashrc, or copy it to ~/.local/share/bash-completion/completions/agentctl',
      '',
      tables(nodes, globals),
      '',
      '_agentctl() {',
      '  local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" cmdpath="" word i args=0 values',
      '  for ((i = 1; i < COMP_CWORD; i++)); do',
      '    word="${COMP_WORDS[i]}"',
      '    if [[ $word == -* ]]; then',
      '      [[ $word != *=* ]] && _agentctl_option_values "$cmdpath" "$word" >/dev/null && ((i++))',
      '      continue',
      '    fi',
      '    case " $(_agentctl_subcommands "$cmdpath") " in',
      '      *" $word "*) cmdpath="${cmdpath:+$cmdpath }$word"; args=0 ;;',
      '      *) ((args++)) ;;',
      '    esac',
      '  done',
      '  if [[ $prev == -* ]] && values="$(_agentctl_option_values "$cmdpath" "$prev")"; then',
      '    :',
      '  elif [[ $cur == -* ]]; then',
      '    values="$(_agentctl_options "$cmdpath")"',
      '  elif [[ $args == 0 && -n "$(_agentctl_subcommands "$cmdpath")" ]]; then',
      '    values="$(_agentctl_subcommands "$cmdpath")"',
      '  else',
      '    values="$(_agentctl_argument_values "$cmdpath" "$args")"',
      '  fi',
      '  case "$values" in',
      '    @files) mapfile -t COMPREPLY < <(compgen -f -- "$cur") ;;',
      '    @none) COMPREPLY=() ;;',
      '    *) mapfile -t COMPREPLY < <(compgen -W "$values" -- "$cur") ;;',
      '  esac',
      '}',
      'complete -F _agentctl agentctl',
    ].join('\n')}\n`;
  }
  if (shell === 'zsh') {
    return `${[
      '#compdef agentctl',
      header,
      '# Install: put it in a directory on $fpath as _agentctl, then run compinit.',
      '',
      tables(nodes, globals),
      '',
      '_agentctl() {',
      '  local cmdpath="" word i args=0 values prev=${words[CURRENT-1]}',
      '  for ((i = 2; i < CURRENT; i++)); do',
      '    word=${words[i]}',
      '    if [[ $word == -* ]]; then',
      '      [[ $word != *=* ]] && _agentctl_option_values "$cmdpath" "$word" >/dev/null && ((i++))',
      '      continue',
      '    fi',
      '    if (( ${${(z)"$(_agentctl_subcommands "$cmdpath")"}[(Ie)$word]} )); then',
      '      cmdpath="${cmdpath:+$cmdpath }$word"; args=0',
      '    else',
      '      ((args++))',
      '    fi',
      '  done',
      '  if [[ $prev == -* ]] && values="$(_agentctl_option_values "$cmdpath" "$prev")"; then',
      '    :',
      '  elif [[ ${words[CURRENT]} == -* ]]; then',
      '    values="$(_agentctl_options "$cmdpath")"',
      '  elif [[ $args == 0 && -n "$(_agentctl_subcommands "$cmdpath")" ]]; then',
      '    values="$(_agentctl_subcommands "$cmdpath")"',
      '  else',
      '    values="$(_agentctl_argument_values "$cmdpath" "$args")"',
      '  fi',
      '  case "$values" in',
      '    @files) _files ;;',
      '    @none) ;;',
      '    *) compadd -- ${(z)values} ;;',
      '  esac',
      '}',
      '',
      '_agentctl "$@"',
    ].join('\n')}\n`;
  }
  const quote = (text: string) => `'${text.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  const lines = [
    header,
    '# Install: copy it to ~/.config/fish/completions/agentctl.fish',
    '',
    'complete -c agentctl -f',
  ];
  const fishValues = (values: Values | undefined) => {
    if (values === undefined) return '';
    if (values === '@files') return ' -r -F';
    if (values === '@none') return ' -r';
    if (isDynamic(values)) {
      return ` -r -a ${quote(`(agentctl completion --values ${values.slice(1)} 2>/dev/null)`)}`;
    }
    return ` -r -a ${quote(values.join(' '))}`;
  };
  for (const option of root.options) {
    lines.push(
      `complete -c agentctl -l ${option.flag.slice(2)}${fishValues(option.values)} -d ${quote(option.description)}`,
    );
  }
  for (const node of nodes) {
    const condition =
      node.path === ''
        ? '__fish_use_subcommand'
        : `__fish_seen_subcommand_from ${node.path.split(' ').at(-1)}`;
    for (const sub of node.subcommands) {
      lines.push(
        `complete -c agentctl -n ${quote(condition)} -a ${sub.name} -d ${quote(sub.summary)}`,
      );
    }
    if (node.path === '') continue;
    // fish does not count positions: every value any argument of the command takes.
    for (const values of ARGUMENT_VALUES[node.path] ?? []) {
      if (values === '@none' || values === '@files') continue;
      lines.push(
        `complete -c agentctl -n ${quote(condition)}${fishValues(values).replace(' -r', '')}`,
      );
    }
    for (const option of node.options) {
      if (option.flag === '--help') continue;
      lines.push(
        `complete -c agentctl -n ${quote(condition)} -l ${option.flag.slice(2)}${fishValues(option.values)} -d ${quote(option.description)}`,
      );
    }
  }
  return `${lines.join('\n')}\n`;
}
