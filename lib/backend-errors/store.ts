import { dirname } from 'node:path'
import type { Logger } from 'pino'
import { readFailure } from '../file-error.js'
import { watchFolder, type ReloadOutcome } from '../watch.js'
import { loadBackendErrors, readBackendErrors, type BackendErrorRules, type BackendErrorSource } from './rules.js'

/** The rules of a watched file: `rules` is always one whole compiled set. */
export interface BackendErrorStore extends BackendErrorSource {
  /** Re-reads the file now, as SIGHUP asks. */
  reload(): Promise<void>
  /** Stops watching. */
  close(): void
}

export interface WatchBackendErrorsOptions {
  /** Where reloads and refused versions of the file are reported. */
  logger?: Pick<Logger, 'info' | 'warn'>
  /** As for the policies (docs/policies.md). Defaults 75 and 1000 ms. */
  debounceMs?: number
  rescanMs?: number
  /** Told what a reload did, when it applied the file, refused a new version of it, or the file stopped being refused. */
  onReload?: (outcome: ReloadOutcome) => void
  /** Told after every read of the file, even one that found nothing new (lib/watch.ts). */
  onRead?: () => void
}

/**
 * Loads a rules file (an invalid one throws EBACKENDERRORS: the gateway does
 * not start), then keeps it current as the policies are kept: its folder is
 * watched (lib/watch.ts), so an atomic rename or a ConfigMap's symlink swap is
 * seen; a valid version replaces the rules in one assignment, an invalid or
 * missing one is logged and reported once (and at each SIGHUP) and the last
 * good rules stay in force.
 */
export async function watchBackendErrors(
  file: string,
  options: WatchBackendErrorsOptions = {},
): Promise<BackendErrorStore> {
  const { logger, onReload } = options
  let current: BackendErrorRules = await loadBackendErrors(file)
  /** The reason last logged, so that the periodic re-read does not repeat a warning every second. */
  let reported: string | undefined

  async function reload(forced: boolean): Promise<void> {
    const loaded = await readBackendErrors(file).catch((error: unknown) => [readFailure(error)])
    if (Array.isArray(loaded)) {
      const reason = loaded.join('; ')
      if (!forced && reason === reported) return
      reported = reason
      logger?.warn({ file, reason }, 'backend errors file refused, its last good rules stay in force')
      onReload?.({ applied: false, refused: [{ file, reason }], refusedNow: 1 })
      return
    }
    const wasRefused = reported !== undefined
    reported = undefined
    const applied = forced || JSON.stringify(loaded.rules) !== JSON.stringify(current.rules)
    current = loaded
    if (applied) logger?.info({ file, rules: loaded.rules.length }, 'backend errors rules reloaded')
    if (applied || wasRefused) onReload?.({ applied, refused: [], refusedNow: 0 })
  }

  const watcher = watchFolder(dirname(file), reload, {
    debounceMs: options.debounceMs,
    rescanMs: options.rescanMs,
    logger,
    onRead: options.onRead,
  })
  return {
    get rules() {
      return current
    },
    reload: () => watcher.reload(),
    close: () => watcher.close(),
  }
}
