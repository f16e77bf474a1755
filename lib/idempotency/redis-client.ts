import { Redis } from 'ioredis'
import { IDEMPOTENCY_DEFAULTS } from '../defaults.js'

export interface RedisClientOptions {
  /** Longest wait for one command before it rejects, in ms. Default 1000. */
  commandTimeoutMs?: number
  /** Told of every client error (a refused connection, a lost one), so it can be logged and counted; never thrown. */
  onError?: (error: Error) => void
}

/** Longest pause between two reconnection attempts, in ms: a Redis back from a restart is used again within it. */
const RECONNECT_MAX_MS = 1000

/**
 * An ioredis client that fails fast while Redis is down and recovers without
 * a restart: no offline queue (a command sent while disconnected rejects at
 * once instead of waiting), a timeout on every command, and reconnection
 * attempts forever, at most `RECONNECT_MAX_MS` apart. Creating it never
 * throws, whether Redis is up or not.
 */
export function createRedisClient(url: string, options: RedisClientOptions = {}): Redis {
  const commandTimeout = options.commandTimeoutMs ?? IDEMPOTENCY_DEFAULTS.commandTimeoutMs
  const client = new Redis(url, {
    enableOfflineQueue: false,
    commandTimeout,
    connectTimeout: Math.max(commandTimeout, RECONNECT_MAX_MS),
    maxRetriesPerRequest: 1,
    retryStrategy: (attempt) => Math.min(attempt * 50, RECONNECT_MAX_MS),
  })
  const onError = options.onError
  // Without a listener, ioredis prints each error on the console; with one, the caller decides.
  client.on('error', (error: Error) => onError?.(error))
  return client
}

/** Resolves true once the client is connected, false after `timeoutMs`; never rejects. */
export function whenReady(client: Redis, timeoutMs: number): Promise<boolean> {
  if (client.status === 'ready') return Promise.resolve(true)
  return new Promise((resolve) => {
    const done = (ready: boolean) => {
      clearTimeout(timer)
      client.off('ready', onReady)
      resolve(ready)
    }
    const onReady = () => done(true)
    const timer = setTimeout(() => done(false), timeoutMs)
    client.on('ready', onReady)
  })
}

/** Quits cleanly when connected, then stops any reconnection attempt. */
export async function closeRedisClient(client: Redis): Promise<void> {
  try {
    if (client.status === 'ready') await client.quit()
  } finally {
    client.disconnect()
  }
}
