import { randomBytes } from 'node:crypto'

/**
 * A client's `X-Request-Id` kept as it came: 1 to 128 visible ASCII
 * characters, without quotes, backslashes, spaces or the separators
 * `,;()<>[]{}` that would split a header list or a log line
 * (docs/logs-and-metrics.md, request ids).
 */
const SANE = /^[\w!#$%&*+\-./:=?@^|~]{1,128}$/

/** Random per process, so that the ids of workers and restarts never meet; a counter makes each one new. */
const PREFIX = `${randomBytes(9).toString('base64url')}-`
let counter = 0

/** The request's id: the client's `X-Request-Id` when it is sane, else a new one. */
export function requestIdOf(header: string | string[] | undefined): string {
  // A repeated header arrives joined by ", ", which is not sane: it gets a new id.
  if (typeof header === 'string' && SANE.test(header)) return header
  return PREFIX + (++counter).toString(36)
}
