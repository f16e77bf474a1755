/**
 * The codes of payments-gate's own errors: a caller tells them apart by code, never by message.
 * The start-up ones become one line and exit 2 in the CLI (cli/startup.ts, cli/main.ts).
 */
export type ErrorCode =
  /** A start-up or usage failure: the CLI prints the message as one line and exits 2. */
  | 'EUSAGE'
  /** A flag's value that cannot be used; the message says what to give instead ("must be ..."). */
  | 'EINVALID'
  /** A credentials file or user list refused. */
  | 'ECREDENTIALS'
  /** A policy file refused at start-up. */
  | 'EPOLICY'
  /** A backend-error rules file refused. */
  | 'EBACKENDERRORS'
  /** An `--idempotency` store spec or Redis URL that is none of the forms taken. */
  | 'EIDEMPOTENCY'
  /** No `--idempotency-fingerprint-key` for a shared store, or one that cannot be read or is too short. */
  | 'EFINGERPRINTKEY'
  /** The backend did not answer within `--timeout` (the pass-through engine's own timer). */
  | 'EBACKENDTIMEOUT'
  /** A payment still at the backend when the drain's time ran out: its outcome is unknown (docs/deployment-reference.md, stopping). */
  | 'EDRAINED'
  /** The backend answered `101 Switching Protocols` on a path passed through, which never asks for it, or a 1xx as final. */
  | 'EBACKENDUPGRADE'
  /** Fewer replicas than asked acknowledged a write in time (docs/idempotency-reference.md, replicas and failover). */
  | 'EREPLICAS'
  /** The memory store has no room left but claims of payments in flight (docs/idempotency.md). */
  | 'ESTOREFULL'
  /** A release of a Redis claim failed every attempt: its key stays held until the claim expires (docs/idempotency.md). */
  | 'ERELEASE'
  /** A record of a Redis claim's answer failed every attempt: past its window the key answers as the unknown outcome (docs/idempotency.md). */
  | 'ERECORD'
  /** A Redis command not sent, because the connection is not up: it certainly did not run. */
  | 'ENOTCONNECTED'
  /** A Redis store whose maxmemory-policy may evict keys, or will not tell it: claims are refused (docs/idempotency-reference.md). */
  | 'EEVICTION'

/** How a message names an option: the library's name (`idempotencyFingerprintKey`), or the CLI's flag or variable for it. */
export type OptionNamer = (option: string) => string

/** A message that names options, worded by how they are named. */
export type Wording = (name: OptionNamer) => string

/**
 * The one way payments-gate makes an error of its own: a message and a code from the list above. A
 * message about options is given as a function of how they are named, so that the library's message
 * names the option its caller passed and the CLI's names the flag or variable the value came from.
 */
export class CodedError<C extends ErrorCode = ErrorCode> extends Error {
  readonly code: C
  /** The message with the options it names worded by `name`; undefined for a message that names none. */
  readonly worded: Wording | undefined

  constructor(code: C, message: string | Wording) {
    super(typeof message === 'string' ? message : message((option) => option))
    this.code = code
    this.worded = typeof message === 'string' ? undefined : message
  }
}

/** Whether `error` is one of ours with this code. */
export function isCoded<C extends ErrorCode>(error: unknown, code: C): error is CodedError<C> {
  return error instanceof CodedError && error.code === code
}

/**
 * `error` with the options it names renamed, for a caller that took them under other names (the gate's
 * `throttleRedis` is the store's `idempotency`, the CLI's `--idempotency-fingerprint-key` is `idempotencyFingerprintKey`);
 * any other error as it is.
 */
export function renamed(error: unknown, rename: OptionNamer): unknown {
  if (!(error instanceof CodedError) || error.worded === undefined) return error
  const worded = error.worded
  return new CodedError(error.code, (name) => worded((option) => name(rename(option))))
}
