import { dirname } from 'node:path'
import type { Logger } from 'pino'
import type { Authenticator } from '../checks/auth.js'
import { FILE_LIMITS } from '../defaults.js'
import { readFailure } from '../file-error.js'
import { readLimitedText } from '../read-file.js'
import { watchFolder, type ReloadOutcome, type WatchOptions } from '../watch.js'
import { openCredentials, parseCredentials } from './load.js'
import type { CredentialStoreOptions } from './store.js'

export interface WatchCredentialsOptions extends CredentialStoreOptions, WatchOptions {
  /** Where reloads and a refused file are reported. */
  logger?: Pick<Logger, 'info' | 'warn'>
  /** Told what a reload did, when it applied the file, refused a new version of it, or the file stopped being refused. */
  onReload?: (outcome: ReloadOutcome) => void
}

/** The users of a watched credentials file. */
export interface WatchedCredentials extends Authenticator {
  /** How many users are in force. */
  readonly size: number
  /** Re-reads the file now, as SIGHUP asks; resolves once the users read are in force. */
  reload(): Promise<void>
  /** Stops watching. */
  close(): void
}

/**
 * Loads a credentials file as `loadCredentials` does, then keeps it current
 * as the policy folder is kept (lib/watch.ts): a valid new version replaces the
 * users at once (`CredentialStore.replace`); a refused one leaves the last good
 * users in force and is logged and reported once.
 */
export async function watchCredentials(
  file: string,
  options: WatchCredentialsOptions = {},
): Promise<WatchedCredentials> {
  const { logger, onReload } = options
  const opened = await openCredentials(file, options)
  const { store } = opened
  let inForce = opened.text
  /** The refused version already reported, while the file is refused. */
  let refused: string | undefined

  async function reload(forced: boolean): Promise<void> {
    let text: string | undefined
    try {
      text = await readLimitedText(file, FILE_LIMITS.credentials)
      if (text !== inForce) await store.replace(parseCredentials(text))
    } catch (error) {
      // A file that cannot be read is said in words, one that does not parse by its own message (docs/cli.md).
      const reason = text === undefined ? readFailure(error) : (error as Error).message
      const version = `${reason}\n${text ?? ''}`
      if (!forced && version === refused) return
      refused = version
      logger?.warn({ file, reason }, 'credentials file refused, its last good users stay in force')
      onReload?.({ applied: false, refused: [{ file, reason }], refusedNow: 1 })
      return
    }
    const applied = forced || text !== inForce
    const wasRefused = refused !== undefined
    inForce = text
    refused = undefined
    if (applied) logger?.info({ file, users: store.size }, 'credentials reloaded')
    if (applied || wasRefused) onReload?.({ applied, refused: [], refusedNow: 0 })
  }

  const watch = watchFolder(dirname(file), reload, options)
  return {
    authenticate: (authorization, client) => store.authenticate(authorization, client),
    get size() {
      return store.size
    },
    reload: watch.reload,
    close: watch.close,
  }
}
