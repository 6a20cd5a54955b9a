import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { describeError } from './api';

export interface Loaded<T> {
  data: T | undefined;
  error: string | null;
  loading: boolean;
  /** Loads again now (after an action), and restarts the polling at its shortest delay. */
  reload: () => void;
}

export interface PollOptions {
  /** Poll again after this many ms, growing by half each time nothing changed, up to `maxMs`. */
  minMs?: number;
  maxMs?: number;
  /** Whether to keep polling given the last data (e.g. not once a job is finished). */
  while?: (data: unknown) => boolean;
}

/**
 * Loads `fn` when `key` changes; with `poll`, again and again with backoff: every `minMs` while
 * the answer changes, slower while it does not, paused while the tab is hidden. So a job
 * moving through the pipeline shows each state without a reload, and an idle page costs little.
 */
export function useLoad<T>(fn: (signal: AbortSignal) => Promise<T>, key: string, poll?: PollOptions): Loaded<T> {
  const [state, setState] = useState<{ data: T | undefined; error: string | null; loading: boolean }>({ data: undefined, error: null, loading: true });
  const [tick, setTick] = useState(0);
  const fnRef = useRef(fn);
  fnRef.current = fn;
  const reload = useCallback(() => setTick((t) => t + 1), []);

  useEffect(() => {
    const controller = new AbortController();
    let timer: number | undefined;
    let delay = poll?.minMs ?? 2000;
    let last = '';
    let stopped = false;
    const run = async () => {
      if (stopped) return;
      setState((s) => ({ ...s, loading: true }));
      try {
        const data = await fnRef.current(controller.signal);
        if (stopped) return;
        const text = JSON.stringify(data);
        delay = text === last ? Math.min(delay * 1.5, poll?.maxMs ?? 30_000) : (poll?.minMs ?? 2000);
        last = text;
        setState({ data, error: null, loading: false });
        if (poll && (poll.while?.(data) ?? true)) schedule();
      } catch (err) {
        if (stopped || controller.signal.aborted) return;
        setState((s) => ({ ...s, error: describeError(err), loading: false }));
        delay = Math.min(delay * 2, poll?.maxMs ?? 30_000);
        if (poll) schedule();
      }
    };
    const schedule = () => {
      timer = window.setTimeout(() => {
        if (document.hidden) {
          document.addEventListener('visibilitychange', () => void run(), { once: true });
          return;
        }
        void run();
      }, delay);
    };
    void run();
    return () => {
      stopped = true;
      controller.abort();
      window.clearTimeout(timer);
    };
  }, [key, tick]);

  return { ...state, reload };
}

/** Runs a user action: busy while it runs, its error in words, then `after`. */
export function useAction(): { busy: boolean; error: string | null; run: (fn: () => Promise<void>) => Promise<boolean>; clear: () => void } {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const run = useCallback(async (fn: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await fn();
      return true;
    } catch (err) {
      setError(describeError(err));
      return false;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, run, clear: () => setError(null) };
}
