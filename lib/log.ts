import pino, { type DestinationStream, type Logger } from 'pino'
import { maskCardNumbers } from './card-mask.js'
import { LOG_DEFAULTS } from './defaults.js'

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
 * Where the JSON lines go by default (`dest`: a file descriptor or a path):
 * pino's asynchronous destination, gathering lines into writes of a few KiB,
 * each at most PIPE_BUF bytes of whole lines (LOG_DEFAULTS.writeBytes).
 * Written one by one, each line cost a write of its own handed to libuv's
 * thread pool and woke the event loop again when it was done: on a gateway
 * that is not saturated, more CPU than the rest of the log line
 * (docs/performance.md). The lines still waiting are written every
 * `flushIntervalMs`, by `logger.flush()` (serve does on SIGTERM, after the
 * drain), and synchronously when the process exits, a crash included (pino
 * registers the destination for it).
 */
export function createLogDestination(dest: string | number = 1): DestinationStream {
  return pino.destination({
    dest,
    sync: false,
    minLength: LOG_DEFAULTS.bufferBytes,
    maxWrite: LOG_DEFAULTS.writeBytes,
    periodicFlush: LOG_DEFAULTS.flushIntervalMs,
  })
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
    options.destination ?? createLogDestination(),
  )
}
