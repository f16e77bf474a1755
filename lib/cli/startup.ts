import type { AddressInfo } from 'node:net'
import { CodedError, type ErrorCode } from '../coded-error.js'
import { FILE_LIMITS } from '../defaults.js'
import { readFailure } from '../file-error.js'
import { redisTarget, redisTls, TLS_URL_FORMS } from '../idempotency/redis-client.js'
import { readLimitedFile, readLimitedText } from '../read-file.js'
import { checkBundle, PemRefusal } from '../tls/pem.js'
import type { Address } from './options.js'
import { SAMPLE_POLICIES } from '../package-files.js'

/** Why a port could not be bound, and what to do, by the listen error's code. */
const LISTEN_FAILURES: Readonly<Record<string, string>> = {
  EADDRINUSE: 'is in use; stop what listens there or give another port',
  EACCES: 'needs privileges (a port below 1024); give a port above 1023',
  EADDRNOTAVAIL: 'is not an address of this host; give one of its addresses, or only a port for all of them',
  ENOTFOUND: 'names a host that does not resolve; give an IP address',
}

/** Hosts that mean every address: a listener on one of them takes its port on every other host too. */
const EVERY_HOST = new Set([undefined, '0.0.0.0', '::'])

/**
 * `--admin` on the port `--listen` takes, on the same host or on every host: one of the two could never be bound,
 * and the failure would blame what listens there, which is this process. One line, before either is bound.
 */
export function checkApart(admin: Address, listen: Address, where: (key: string) => string): void {
  const crossing = admin.host === listen.host || EVERY_HOST.has(admin.host) || EVERY_HOST.has(listen.host)
  if (admin.port !== 0 && admin.port === listen.port && crossing)
    throw new CodedError(
      'EUSAGE',
      `${where('admin')}: port ${admin.port} is ${where('listen')}'s too; give the admin listener a port of its own`,
    )
}

/** A port that cannot be bound is a start-up failure: one line, exit 2, saying which flag or variable named it. */
export async function bind(where: string, address: Address, listen: () => Promise<AddressInfo>): Promise<AddressInfo> {
  try {
    return await listen()
  } catch (error) {
    const shown = address.host === undefined ? `port ${address.port}` : `${address.host}:${address.port}`
    const failure =
      LISTEN_FAILURES[(error as NodeJS.ErrnoException).code as string] ?? 'cannot be listened on; give another address'
    throw new CodedError('EUSAGE', `${where}: ${shown} ${failure}`)
  }
}

/** The library's options that `serve` reads through a flag of another name: the flag's key (what it reads, a file). */
const FLAG_KEYS: Readonly<Record<string, string>> = {
  idempotencyPassword: 'idempotencyPasswordFile',
  idempotencyCaBundle: 'idempotencyCa',
}

/** What start-up says of each refused input: the key of the flag or variable that named it, and what to do. */
const REFUSED: Partial<Readonly<Record<ErrorCode, readonly [key: string, advice: string]>>> = {
  ECREDENTIALS: ['credentials', 'give a credentials file as docs/credentials.md describes'],
  EBACKENDERRORS: ['backendErrors', 'fix it (payments-gate check-backend-errors FILE lists every problem)'],
  EPOLICY: ['policies', 'fix it (payments-gate check-policies DIR lists every problem)'],
}

/**
 * A policy folder, credentials file or store that start-up cannot read or accept, as one line: the flag or variable that
 * named it, what is wrong, and what to do. Anything else is not the user's to fix and goes on as it is.
 */
export function unreadable(error: unknown, where: (key: string) => string): unknown {
  if (error instanceof CodedError) {
    // The library's message names its options; here each is the flag or variable its value came from.
    if (error.worded !== undefined)
      return new CodedError(
        'EUSAGE',
        error.worded((option) => where(FLAG_KEYS[option] ?? option)),
      )
    const refused = REFUSED[error.code as ErrorCode]
    if (refused !== undefined) return new CodedError('EUSAGE', `${where(refused[0])}: ${error.message}; ${refused[1]}`)
  }
  const { syscall, path } = error as NodeJS.ErrnoException
  // The one file-system call start-up makes outside those two files: reading the policy folder.
  if (syscall !== undefined)
    return new CodedError(
      'EUSAGE',
      `${where('policies')}: ${path}: ${readFailure(error)}; give a readable folder of policy files (docs/policies.md), such as a copy of the samples in ${SAMPLE_POLICIES}`,
    )
  return error
}

/**
 * `--idempotency-password-file`: the Redis password, read once at start (a Secret mounted as a file), its trailing
 * newlines dropped. A file that cannot be read, an empty one, or a store that is not a Redis is one line naming the flag.
 */
export async function storePassword(
  file: string | undefined,
  store: string,
  where: (key: string) => string,
): Promise<string | undefined> {
  if (file === undefined) return undefined
  const flag = where('idempotencyPasswordFile')
  if (redisTarget(store) === undefined)
    throw new CodedError('EUSAGE', `${flag}: ${where('idempotency')} is not a Redis URL`)
  let password: string
  try {
    password = await readLimitedText(file, FILE_LIMITS.secret)
  } catch (error) {
    throw new CodedError('EUSAGE', `${flag}: ${file}: ${readFailure(error)}; give the file the Redis password is in`)
  }
  while (password.endsWith('\n') || password.endsWith('\r')) password = password.slice(0, -1)
  if (password === '')
    throw new CodedError('EUSAGE', `${flag}: ${file} is empty; give the file the Redis password is in`)
  return password
}

/**
 * `--idempotency-ca`: the PEM bundle a TLS Redis's certificate is verified against, read once at start. A store that
 * is not a TLS URL, a file that cannot be read, or one whose first certificate does not parse is one line naming the flag.
 */
export async function storeCa(
  file: string | undefined,
  store: string,
  where: (key: string) => string,
): Promise<Buffer | undefined> {
  if (file === undefined) return undefined
  const flag = where('idempotencyCa')
  if (!redisTls(store))
    throw new CodedError('EUSAGE', `${flag}: ${where('idempotency')} is not a TLS URL; give one of ${TLS_URL_FORMS}`)
  const advice = 'give the PEM bundle of the CA that issued the Redis certificate'
  let pem: Buffer
  try {
    pem = await readLimitedFile(file, FILE_LIMITS.tls)
    checkBundle(pem, 0)
  } catch (error) {
    const reason = error instanceof PemRefusal ? error.message : readFailure(error)
    throw new CodedError('EUSAGE', `${flag}: ${file}: ${reason}; ${advice}`)
  }
  return pem
}
