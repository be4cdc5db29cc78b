import {
  createPrompt,
  isBackspaceKey,
  isEnterKey,
  isTabKey,
  makeTheme,
  type Status,
  useKeypress,
  usePrefix,
  useState,
} from '@inquirer/core';

export interface TextPromptConfig {
  message: string;
  /** Taken by Enter on an empty answer (and checked like a typed one); Tab puts it in to edit. */
  default?: string;
  /** true, or why the answer is refused. */
  validate?: (value: string) => true | string | Promise<true | string>;
}

/**
 * One line of text, checked as it is given: @inquirer/input's keys and look, with one
 * difference. A refused answer is cleared, so the next one is typed afresh and Enter offers
 * the default again; its reason stays only until the next key or answer. (@inquirer/input,
 * in its "clear" mode, keeps the reason under an answer it then accepts: a stale error line
 * under the default the user took.)
 */
export const textPrompt = createPrompt<string, TextPromptConfig>((config, done) => {
  const theme = makeTheme();
  const [status, setStatus] = useState<Status>('idle');
  const [defaultValue, setDefaultValue] = useState(config.default ?? '');
  const [value, setValue] = useState('');
  const [error, setError] = useState<string | undefined>(undefined);
  const prefix = usePrefix({ status, theme });

  useKeypress(async (key, rl) => {
    if (status !== 'idle') return;
    if (isEnterKey(key)) {
      const answer = value || defaultValue;
      setStatus('loading');
      const verdict = (await config.validate?.(answer)) ?? true;
      if (verdict === true) {
        // The reason for an earlier refusal goes with it: the accepted answer stands alone.
        setError(undefined);
        setValue(answer);
        setStatus('done');
        done(answer);
      } else {
        setValue('');
        setError(verdict || 'invalid');
        setStatus('idle');
      }
    } else if (isBackspaceKey(key) && !value) {
      // Backspace on an empty answer drops the default, so an optional field can stay empty.
      setDefaultValue('');
    } else if (isTabKey(key) && !value) {
      setDefaultValue('');
      rl.clearLine(0);
      rl.write(defaultValue);
      setValue(defaultValue);
    } else {
      setValue(rl.line);
      setError(undefined);
    }
  });

  const message = theme.style.message(config.message, status);
  const shown = status === 'done' ? theme.style.answer(value) : value;
  const offered =
    defaultValue && status !== 'done' && !value ? theme.style.defaultAnswer(defaultValue) : '';
  const line = [prefix, message, offered, shown].filter(Boolean).join(' ');
  return [line, error && status !== 'done' ? theme.style.error(error) : ''];
});
