import { dirname } from 'node:path'
import type { Logger } from 'pino'
import { FILE_LIMITS, POLICY_WATCH_DEFAULTS } from '../defaults.js'
import { readFailure } from '../file-error.js'
import { readLimitedFile } from '../read-file.js'
import { watchFolder, type ReloadOutcome, type Watch, type WatchOptions } from '../watch.js'
import { PemRefusal } from './pem.js'

/** One file of TLS material, with the flag that named it (`tlsCert`), for messages. */
export interface TlsFile {
  readonly key: string
  readonly path: string
}

/** What the files give, now and after each reload. */
export interface TlsSource<T> {
  readonly current: T
  /** Told each new value taken into force. */
  onChange(listener: (value: T) => void): void
}

/** Files watched together and re-read on demand. */
export interface WatchedTls<T> extends TlsSource<T> {
  /** Re-reads the files now, as SIGHUP asks. */
  reload(): Promise<void>
  close(): void
}

/** A file that cannot be used: which, and why in words. */
export class TlsProblem extends Error {
  readonly file: TlsFile
  readonly reason: string
  constructor(file: TlsFile, reason: string) {
    super(`${file.path}: ${reason}`)
    this.file = file
    this.reason = reason
  }
}

/** Builds the value from the files' bytes, in the order given; throws a `PemRefusal` naming the file at fault. */
export type Build<T> = (texts: readonly Buffer[]) => T

export interface WatchTlsOptions extends WatchOptions {
  logger?: Pick<Logger, 'info' | 'warn'>
  /** Told what a reload did, like the policies' (lib/watch.ts). */
  onReload?: (outcome: ReloadOutcome) => void
}

type Loaded<T> =
  { readonly value: T; readonly texts: Buffer } | { readonly problem: TlsProblem; readonly texts: Buffer | undefined }

async function load<T>(files: readonly TlsFile[], build: Build<T>): Promise<Loaded<T>> {
  const texts: Buffer[] = []
  for (const file of files) {
    try {
      texts.push(await readLimitedFile(file.path, FILE_LIMITS.tls))
    } catch (error) {
      return { problem: new TlsProblem(file, readFailure(error)), texts: undefined }
    }
  }
  // What tells one version of the files from another: every byte, each file's length first.
  const version = Buffer.concat(texts.flatMap((text) => [Buffer.from(`${text.length}:`), text]))
  try {
    return { value: build(texts), texts: version }
  } catch (error) {
    /* c8 ignore next: only a bug in build throws anything else, and it goes on with its stack */
    if (!(error instanceof PemRefusal)) throw error
    return { problem: new TlsProblem(files[error.index] as TlsFile, error.message), texts: version }
  }
}

/** What tells one refusal from another: the file, the reason and every byte read. */
function refusalOf(loaded: Loaded<unknown> & { problem: TlsProblem }): string {
  const { file, reason } = loaded.problem
  return `${file.path}\n${reason}\n${loaded.texts?.toString('latin1') ?? ''}`
}

/**
 * Loads the files until they load, or until two reads in a row are refused for
 * the same bytes (POLICY_WATCH_DEFAULTS.tlsRefusalReads): the files are read one
 * after another, so a refusal may be of two versions, not of either.
 */
async function loadSettled<T>(files: readonly TlsFile[], build: Build<T>): Promise<Loaded<T>> {
  let loaded = await load(files, build)
  for (let reads = 1; 'problem' in loaded && reads < POLICY_WATCH_DEFAULTS.tlsRefusalReads; reads++) {
    const again = await load(files, build)
    if ('problem' in again && refusalOf(again) === refusalOf(loaded)) return again
    loaded = again
  }
  return loaded
}

/**
 * Loads TLS files (a problem rejects with it: start-up names the flag), then
 * keeps them current as the policies are kept: their folders are watched
 * (lib/watch.ts), so a rename over a file and a Secret's `..data` symlink
 * swap are both seen, and re-read every second. A version that loads is
 * taken into force for new connections; one that does not keeps the last
 * good one, logged once with its reason and reported as a refused file.
 */
export async function watchTlsFiles<T>(
  files: readonly TlsFile[],
  build: Build<T>,
  options: WatchTlsOptions = {},
): Promise<WatchedTls<T>> {
  const { logger, onReload } = options
  const first = await loadSettled(files, build)
  if ('problem' in first) throw first.problem
  let current = first.value
  let inForce = first.texts
  /** The refused version already reported, while the files are refused. */
  let refused: string | undefined
  const listeners: ((value: T) => void)[] = []

  async function reload(forced: boolean): Promise<void> {
    const loaded = await loadSettled(files, build)
    if ('problem' in loaded) {
      const { file, reason } = loaded.problem
      const version = refusalOf(loaded)
      if (!forced && version === refused) return
      refused = version
      logger?.warn({ file: file.path, reason }, 'certificate file refused, the last good one stays in force')
      onReload?.({ applied: false, refused: [{ file: file.path, reason }], refusedNow: 1 })
      return
    }
    const changed = !loaded.texts.equals(inForce)
    const wasRefused = refused !== undefined
    refused = undefined
    if (changed) {
      current = loaded.value
      inForce = loaded.texts
      for (const listener of listeners) listener(current)
      logger?.info({ files: files.map((file) => file.path) }, 'certificates reloaded')
    }
    if (changed || forced || wasRefused) onReload?.({ applied: changed || forced, refused: [], refusedNow: 0 })
  }

  // One reload at a time, whichever folder asked for it.
  let tail = Promise.resolve()
  const serial = (forced: boolean) => (tail = tail.then(() => reload(forced)))
  const folders = new Set(files.map((file) => dirname(file.path)))
  const watches: Watch[] = [...folders].map((dir) => watchFolder(dir, serial, options))
  return {
    get current() {
      return current
    },
    onChange: (listener) => void listeners.push(listener),
    // Every watch re-reads every file: one is enough.
    reload: () => (watches[0] as Watch).reload(),
    close() {
      for (const watch of watches) watch.close()
    },
  }
}
