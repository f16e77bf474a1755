import type { Logger } from 'pino'
import { CodedError } from '../coded-error.js'
import type { TlsSide } from '../metrics.js'
import type { ReloadOutcome } from '../watch.js'
import { type BackendTls, type TargetTls } from '../tls/backend.js'
import { TlsProblem, watchTlsFiles } from '../tls/files.js'
import type { Build, TlsFile, WatchedTls, WatchTlsOptions } from '../tls/files.js'
import { checkBundle, checkPair, clientContext, type KeyPair } from '../tls/pem.js'

/** The TLS flags of `serve` (docs/cli.md). */
export interface CertificateFlags {
  readonly target: URL
  readonly tlsCert?: string | undefined
  readonly tlsKey?: string | undefined
  readonly targetCa?: string | undefined
  readonly targetCert?: string | undefined
  readonly targetKey?: string | undefined
  readonly targetServername?: string | undefined
}

/** The certificate files in force, watched. */
export interface Certificates {
  /** The listener's pair; undefined for plain HTTP. */
  readonly listener: WatchedTls<KeyPair> | undefined
  /** TLS to the backend; undefined for an `http:` target. */
  readonly target: TargetTls | undefined
  /** Re-reads every file now, as SIGHUP asks. */
  reload(): Promise<void>
  close(): void
}

export interface LoadCertificatesOptions extends Omit<WatchTlsOptions, 'onReload'> {
  logger?: Pick<Logger, 'info' | 'warn'>
  /** Told what each reload of one side's files did. */
  onReload?: (side: TlsSide, outcome: ReloadOutcome) => void
}

type Where = (key: string) => string

/** A certificate and its key are given together (`--tls-cert` with `--tls-key`), or neither. */
function pairOf(
  flags: CertificateFlags,
  where: Where,
  certKey: 'tlsCert' | 'targetCert',
  keyKey: 'tlsKey' | 'targetKey',
): TlsFile[] {
  const cert = flags[certKey]
  const key = flags[keyKey]
  if (cert === undefined && key === undefined) return []
  if (cert === undefined || key === undefined) {
    const [given, missing] = cert === undefined ? [keyKey, certKey] : [certKey, keyKey]
    const fix = 'give the certificate and its key, or neither (docs/deployment.md)'
    throw new CodedError('EUSAGE', `${where(given)} needs ${where(missing)} too: ${fix}`)
  }
  return [
    { key: certKey, path: cert },
    { key: keyKey, path: key },
  ]
}

/**
 * Reads the certificate files `serve` was given, checks each (a file that
 * cannot be read or used is a one-line start-up error naming its flag), and
 * watches them: the listener's pair for `--tls-cert`/`--tls-key`, and for an
 * `https:` target its CA bundle and client certificate.
 */
export async function loadCertificates(
  flags: CertificateFlags,
  where: Where,
  options: LoadCertificatesOptions = {},
): Promise<Certificates> {
  const listenerFiles = pairOf(flags, where, 'tlsCert', 'tlsKey')
  const clientFiles = pairOf(flags, where, 'targetCert', 'targetKey')
  const caFiles: TlsFile[] = flags.targetCa === undefined ? [] : [{ key: 'targetCa', path: flags.targetCa }]
  const targetFiles = [...caFiles, ...clientFiles]
  if (flags.target.protocol !== 'https:') {
    const httpsOnly = ['targetCa', 'targetCert', 'targetServername'] as const
    const key = httpsOnly.find((name) => flags[name] !== undefined)
    const fix = 'give an https:// URL or leave it out'
    if (key !== undefined) throw new CodedError('EUSAGE', `${where(key)} is for an https:// ${where('target')}; ${fix}`)
  }
  const report = (side: TlsSide) => (outcome: ReloadOutcome) => options.onReload?.(side, outcome)
  const watched: WatchedTls<unknown>[] = []
  const started = async <T>(files: TlsFile[], build: Build<T>, side: TlsSide): Promise<WatchedTls<T>> => {
    const watch = await watchTlsFiles(files, build, { ...options, onReload: report(side) }).catch((error: unknown) => {
      for (const other of watched) other.close()
      /* c8 ignore next: only a bug throws anything else, and it goes on with its stack */
      if (!(error instanceof TlsProblem)) throw error
      const fix = 'give a readable PEM file (docs/deployment-reference.md#tls)'
      throw new CodedError('EUSAGE', `${where(error.file.key)}: ${error.message}; ${fix}`)
    })
    watched.push(watch)
    return watch
  }
  const listener =
    listenerFiles.length === 0 ? undefined : await started(listenerFiles, (texts) => pairAt(texts, 0), 'listener')
  let target: TargetTls | undefined
  if (flags.target.protocol === 'https:') {
    const clientAt = caFiles.length
    const build = (texts: readonly Buffer[]): BackendTls => {
      const ca = caFiles.length === 0 ? undefined : (texts[0] as Buffer)
      if (ca !== undefined) checkBundle(ca, 0)
      return { context: clientContext(ca, clientFiles.length === 0 ? undefined : pairAt(texts, clientAt)) }
    }
    const files = targetFiles.length === 0 ? undefined : await started(targetFiles, build, 'target')
    target = { files, servername: flags.targetServername }
  }
  return {
    listener,
    target,
    reload: async () => void (await Promise.all(watched.map((watch) => watch.reload()))),
    close() {
      for (const watch of watched) watch.close()
    },
  }
}

/** The pair at `index` and the next, checked. */
function pairAt(texts: readonly Buffer[], index: number): KeyPair {
  const pair = { cert: texts[index] as Buffer, key: texts[index + 1] as Buffer }
  checkPair(pair, index)
  return pair
}
