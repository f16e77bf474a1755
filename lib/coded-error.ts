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
  /** Fewer replicas than asked acknowledged a write in time (docs/idempotency.md, replicas). */
  | 'EREPLICAS'
  /** The memory store has no room left but claims of payments in flight (docs/idempotency.md). */
  | 'ESTOREFULL'
  /** A release of a Redis claim failed every attempt: its key stays held until the claim expires (docs/idempotency.md). */
  | 'ERELEASE'
  /** A record of a Redis claim's answer failed every attempt: past its window the key answers as the unknown outcome (docs/idempotency.md). */
  | 'ERECORD'
  /** A Redis command not sent, because the connection is not up: it certainly did not run. */
  | 'ENOTCONNECTED'

/** The one way payments-gate makes an error of its own: a message and a code from the list above. */
export class CodedError<C extends ErrorCode = ErrorCode> extends Error {
  readonly code: C

  constructor(code: C, message: string) {
    super(message)
    this.code = code
  }
}

/** Whether `error` is one of ours with this code. */
export function isCoded<C extends ErrorCode>(error: unknown, code: C): error is CodedError<C> {
  return error instanceof CodedError && error.code === code
}
