import { watch } from 'node:fs'
import type { Logger } from 'pino'
import { POLICY_WATCH_DEFAULTS } from './defaults.js'

/** A file that could not be taken into force, and why. */
export interface FileProblem {
  readonly file: string
  readonly reason: string
}

/**
 * What one reload did, for the metrics (docs/logs-and-metrics.md): told after
 * a reload that applied something, refused a new version of a file, or
 * changed how many files are refused.
 */
export interface ReloadOutcome {
  /** What is in force changed, or a signal asked for the reload and nothing was refused: one reload `ok`. */
  readonly applied: boolean
  /** Each version of a file refused for the first time (on a signal: every refused file): one reload `failed` each. */
  readonly refused: readonly FileProblem[]
  /** How many files are refused now, their last good version in force. */
  readonly refusedNow: number
}

export interface WatchOptions {
  /** How long to wait for a burst of file events to settle before reloading, in ms. Default 75. */
  debounceMs?: number
  /** Full re-read at this interval, in case a file event was missed (network file systems), in ms. Default 1000. */
  rescanMs?: number
  /** Where a watch the OS refused, and a reload that failed, are reported. */
  logger?: Pick<Logger, 'warn'>
  /**
   * Told after every read of the files, once what was read is in force or refused, even a read that found
   * nothing new (which reports nothing else): what a caller that wrote a file waits for to know it was read.
   */
  onRead?: () => void
}

/** Re-reads on demand and on every change; `close` stops it. */
export interface Watch {
  /** Re-reads now, as a signal asks (`forced`), after the reload running if any; resolves once done. */
  reload(): Promise<void>
  /** Stops watching: no reload starts after this, no handle is left open. */
  close(): void
}

/**
 * Runs `reload` after any event in `dir` (once the burst settled), every
 * `rescanMs` as a safety net, and when asked; one at a time, events during a
 * reload asking for one more after it. Watching the folder rather than a file
 * covers an editor's write-then-rename and a Kubernetes ConfigMap or Secret's
 * `..data` symlink swap alike: the file's own inode is replaced by both.
 * `forced` is true for a reload that was asked for (a signal).
 */
export function watchFolder(
  dir: string,
  reload: (forced: boolean) => Promise<void>,
  options: WatchOptions = {},
): Watch {
  const debounceMs = options.debounceMs ?? POLICY_WATCH_DEFAULTS.debounceMs
  const rescanMs = options.rescanMs ?? POLICY_WATCH_DEFAULTS.rescanMs
  let closed = false
  let forced = false
  /** The reload waiting for the running one to end; a request meanwhile joins it. */
  let queued: Promise<void> | undefined
  let tail = Promise.resolve()
  let debounce: NodeJS.Timeout | undefined

  function run(force: boolean): Promise<void> {
    if (force) forced = true
    if (queued === undefined) {
      queued = tail.then(async () => {
        queued = undefined
        const asked = forced
        forced = false
        if (closed) return
        try {
          await reload(asked)
          options.onRead?.()
        } catch (error) {
          // A listener that threw (a caller's onReload): told, and every later reload still runs, where a rejected
          // link would hold up the chain for good and a reload a timer started would end the process.
          options.logger?.warn({ err: error }, 'reload failed')
        }
      })
      tail = queued
    }
    return queued
  }

  function schedule(): void {
    clearTimeout(debounce)
    debounce = setTimeout(() => void run(false), debounceMs)
  }

  const watcher = watch(dir, { persistent: false }, schedule)
  // The watcher fails only when the OS refuses it (inotify limits): the periodic re-scan carries on, and
  // a listener must exist or the error would end the process. No test can make the OS do that.
  /* c8 ignore next */
  watcher.on('error', (error) =>
    options.logger?.warn({ dir, reason: error.message }, 'folder watch failed, re-scanning only'),
  )
  const rescan = setInterval(() => void run(false), rescanMs)
  rescan.unref()

  return {
    reload: () => run(true),
    close() {
      closed = true
      watcher.close()
      clearTimeout(debounce)
      clearInterval(rescan)
    },
  }
}
