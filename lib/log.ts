import pino, { type DestinationStream, type Logger } from 'pino'
import { maskCardNumbers } from './card-mask.js'

export type { Logger } from 'pino'

let second = Number.NaN
let secondText = ''

/**
 * pino's `isoTime` formats a new Date for every line; a gateway writes
 * thousands of lines a second, so the text up to the second is kept and only
 * the milliseconds are added.
 */
export function isoTime(now = Date.now()): string {
  const current = Math.floor(now / 1000)
  if (current !== second) {
    second = current
    secondText = new Date(current * 1000).toISOString().slice(0, 20)
  }
  return `,"time":"${secondText}${String(now % 1000).padStart(3, '0')}Z"`
}

/**
 * The process's JSON logger. Masking runs on each finished line rather than on
 * known fields (pino's `redact`), because a card number can arrive anywhere a
 * client controls text: the path, a query string, a user name, an entity.
 * Times are ISO strings so that no epoch number looks like a card.
 */
export function createLogger(options: { level?: string; destination?: DestinationStream } = {}): Logger {
  return pino(
    {
      level: options.level ?? 'info',
      base: { pid: process.pid },
      timestamp: isoTime,
      hooks: { streamWrite: maskCardNumbers },
    },
    options.destination ?? pino.destination({ dest: 1, sync: false }),
  )
}
