import pino, { type DestinationStream, type Logger } from 'pino'
// The package's module is its class, which also carries itself as `SonicBoom`: the one name node and TypeScript agree on.
import sonicBoom, { type SonicBoom } from 'sonic-boom'
import { mayHoldBytes, maskCardNumbers } from './card-mask.js'
import { LOG_DEFAULTS } from './defaults.js'

export type { Logger } from 'pino'

let second = Number.NaN
let secondText = ''
let millisecond = Number.NaN
let millisecondText = ''

/**
 * pino's `isoTime` formats a new Date for every line; a gateway writes
 * thousands of lines a second, many in the same millisecond, so the text of
 * the last millisecond is kept, and the text up to the second, to which only
 * the milliseconds are added.
 */
export function isoTime(now = Date.now()): string {
  if (now === millisecond) return millisecondText
  const current = Math.floor(now / 1000)
  if (current !== second) {
    second = current
    secondText = new Date(current * 1000).toISOString().slice(0, 20)
  }
  millisecond = now
  millisecondText = `,"time":"${secondText}${String(now % 1000).padStart(3, '0')}Z"`
  return millisecondText
}

/** What went wrong with the log's own destination, where no line can say so: a write that failed, a line dropped. */
export type LogTrouble = 'writeFailed' | 'lineDropped'

/** How the lines of a destination are written. */
export interface LogDestinationOptions {
  /**
   * Other processes write to the same pipe (the workers of `--workers` share
   * stdout): each write is then at most PIPE_BUF bytes of whole lines, so
   * that their lines never mix (LOG_DEFAULTS.shared). Default false.
   */
  shared?: boolean
  /** Told of each write that failed (a full disk, an I/O error), and of each line dropped as `heldBytes` were waiting. */
  onTrouble?: (trouble: LogTrouble) => void
}

/**
 * Where the JSON lines go by default (`dest`: a file descriptor or a path):
 * sonic-boom, pino's asynchronous destination, gathering whole lines into
 * batches (LOG_DEFAULTS). Written one by one, each line cost a write of its
 * own handed to libuv's thread pool, and woke the event loop again when it
 * was done; large batches make that once per hundred-odd lines
 * (docs/performance-history.md). The lines still waiting are written every
 * `flushIntervalMs`, by `logger.flush()` (serve does on SIGTERM, after the
 * drain), and synchronously when the process exits, a crash included.
 *
 * A write that fails (a full disk, EIO) neither ends the process nor stops
 * its payments: the lines wait, up to `heldBytes`, and are written once the
 * destination takes them again; beyond that, new lines are dropped
 * (docs/logs-and-metrics.md). sonic-boom 5, not pino's own 4: its synchronous
 * flush at exit throws on such an error, where 4's retried it for ever and
 * left the process hung in its exit.
 *
 * sonic-boom is run on bytes (`contentMode: 'buffer'`), each line turned into
 * a Buffer as it comes: fed text, it measures the whole batch waiting
 * (`Buffer.byteLength`) for every line it adds, a cost that grows with the
 * batch; fed bytes, it keeps the counts. The card masker screens those bytes
 * (`mayHoldBytes`), and masks the few lines it sends on: a logger writing
 * here needs no masking hook of its own (createLogger).
 */
export function createLogDestination(
  dest: string | number = 1,
  options: LogDestinationOptions = {},
): DestinationStream {
  const sizes = options.shared === true ? LOG_DEFAULTS.shared : LOG_DEFAULTS.alone
  const destination = new sonicBoom.SonicBoom({
    dest,
    sync: false,
    contentMode: 'buffer',
    minLength: sizes.bufferBytes,
    maxWrite: sizes.writeBytes,
    maxLength: LOG_DEFAULTS.heldBytes,
    periodicFlush: LOG_DEFAULTS.flushIntervalMs,
  })
  const onTrouble = options.onTrouble
  destination.on('error', () => onTrouble?.('writeFailed'))
  destination.on('drop', () => onTrouble?.('lineDropped'))
  flushedAtExit(destination)
  // In buffer mode sonic-boom's `write` takes bytes; its type declares text only.
  const writeBytes = destination.write.bind(destination) as unknown as (bytes: Buffer) => boolean
  destination.write = (line: string) => {
    const bytes = Buffer.from(line)
    return writeBytes(mayHoldBytes(bytes) ? Buffer.from(maskCardNumbers(line)) : bytes)
  }
  MASKING.add(destination)
  return destination
}

/** The destinations whose lines are written synchronously as the process exits, each held until it closes. */
const OPEN = new Set<SonicBoom>()
process.on('exit', () => {
  for (const destination of OPEN) {
    try {
      destination.flushSync()
    } catch {
      // The destination refuses them (a full disk): they are lost, and the process ends all the same.
    }
  }
})
function flushedAtExit(destination: SonicBoom): void {
  OPEN.add(destination)
  destination.once('close', () => OPEN.delete(destination))
}

/** The destinations made by createLogDestination, which mask every line they write. */
const MASKING = new WeakSet<DestinationStream>()

/** What a store's error is logged as: its code and message, nothing else it carries. */
export interface ErrorFacts {
  readonly code?: string
  readonly message: string
}

/**
 * An error as a log line may hold it: its code (when it has a text one) and
 * its message. Nothing else an error carries is copied: ioredis puts the
 * failed command and its arguments on its errors (an `AUTH` with the
 * password among them), and a line is no place for either.
 */
export function errorFacts(error: unknown): ErrorFacts {
  if (!(error instanceof Error)) return { message: String(error) }
  const { code } = error as { code?: unknown }
  return typeof code === 'string' ? { code, message: error.message } : { message: error.message }
}

/**
 * pino's serializer of an `err` field copies every enumerable property of the
 * error; this one keeps its type, code, message and stack only (errorFacts), so
 * that what a library hangs on its errors never reaches a line. A value that
 * is not an Error (errorFacts already applied) is logged as given.
 */
export function serializeError(error: unknown): unknown {
  if (!(error instanceof Error)) return error
  return { type: error.name, ...errorFacts(error), stack: error.stack }
}

/**
 * The process's JSON logger. Masking runs on each finished line rather than on
 * known fields (pino's `redact`), because a card number can arrive anywhere a
 * client controls text: the path, a query string, a user name, an entity: in
 * the destination of createLogDestination, else in pino's hook before any
 * other destination. Times are ISO strings so that no epoch number looks like a card.
 */
export function createLogger(options: { level?: string; destination?: DestinationStream } = {}): Logger {
  const destination = options.destination ?? createLogDestination()
  return pino(
    {
      level: options.level ?? 'info',
      base: { pid: process.pid },
      timestamp: isoTime,
      serializers: { err: serializeError },
      hooks: MASKING.has(destination) ? {} : { streamWrite: maskCardNumbers },
    },
    destination,
  )
}

/** The levels the gate writes at, of a pino logger. */
export type LevelLogger = Pick<Logger, 'info' | 'warn' | 'error'>

/**
 * An application's logger (createGate's `logger`) as the gate writes to it: every text and number it is given,
 * however deep, with its card numbers masked (maskedValue). That logger may not mask its lines as createLogger's
 * do, and a request's path or a handler's error may name a card (docs/logs-and-metrics.md). An error is given as
 * serializeError writes it.
 */
export function maskingLogger(logger: LevelLogger): LevelLogger {
  const at =
    (level: keyof LevelLogger) =>
    (fields: Record<string, unknown>, message: string): void =>
      logger[level](maskedValue(fields) as Record<string, unknown>, maskCardNumbers(message))
  return { info: at('info'), warn: at('warn'), error: at('error') } as LevelLogger
}

/** How deep a value given to the application's logger is copied; deeper, it is given as a placeholder. */
const MOST_DEPTH = 8

/**
 * `value` with every text in it masked: a string, a number's digits, an error as serializeError writes it (its type
 * and code too), and the names and values of an object or array, copied (a handler may throw a provider's decoded
 * answer, not an Error).
 */
function maskedValue(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return maskCardNumbers(value)
  if (typeof value === 'number' || typeof value === 'bigint') {
    const text = String(value)
    const shown = maskCardNumbers(text)
    return shown === text ? value : shown
  }
  if (value === null || typeof value !== 'object') return value
  if (value instanceof Error) return maskedValue(serializeError(value), depth)
  if (depth >= MOST_DEPTH) return '[nested too deep]'
  if (Array.isArray(value)) return value.map((item) => maskedValue(item, depth + 1))
  const masked: Record<string, unknown> = {}
  for (const [name, item] of Object.entries(value)) masked[maskCardNumbers(name)] = maskedValue(item, depth + 1)
  return masked
}

/** What a listener tells of a connection it could not accept (lib/http/listen.ts): a line, and it goes on listening. */
export function acceptErrorLog(logger: Logger): (error: Error) => void {
  return (error) => logger.error({ err: error }, 'connection not accepted')
}
