import { availableParallelism } from 'node:os'
import { parseArgs } from 'node:util'
import { DEFAULTS, IDEMPOTENCY_DEFAULTS } from '../defaults.js'
import type { GateOptions } from '../gate.js'
import { UsageError } from './io.js'
import { parseByteCount } from './numbers.js'

export interface Address {
  readonly host: string | undefined
  readonly port: number
}

/** `payments-gate serve` as configured by flags and `PAYMENTS_GATE_*` variables (docs/cli.md): the gate's options and the proxy's. */
export interface ServeOptions extends Required<Pick<GateOptions, 'vendor' | 'basePath' | 'bodyLimit'>> {
  readonly listen: Address
  readonly target: URL
  readonly policies: string
  readonly credentials: string
  readonly timeout: number
  readonly admin: Address | undefined
  /** Processes serving the port; 1 runs the gateway in this process. */
  readonly workers: number
  /** Retry protection's store: `memory`, `off`, a `redis://` or `redis-sentinel://` URL (docs/idempotency.md). */
  readonly idempotency: string
  /** How long a recorded answer is replayed, in seconds. */
  readonly idempotencyTtl: number
  readonly idempotencyFailure: 'closed' | 'open'
  /** The memory store's bounds: most keys, most bytes. */
  readonly idempotencyMaxEntries: number
  readonly idempotencyMaxBytes: number
  /** Proxies in front of the gateway: the log line's client address is the one the farthest of them added to `X-Forwarded-For`. */
  readonly trustProxy: number
  /** Redis replicas that must acknowledge a claim or a record. */
  readonly idempotencyReplicas: number
  /** The rules file naming the backend's error answers (docs/backend-faults.md); none when unset. */
  readonly backendErrors?: string
  /** `enforce`, or `report`: pass requests on as they came and report what enforce would do (docs/rollout.md). */
  readonly mode: 'enforce' | 'report'
}

export const SERVE_FLAGS = [
  'listen',
  'target',
  'policies',
  'credentials',
  'vendor',
  'base-path',
  'body-limit',
  'timeout',
  'admin',
  'workers',
  'idempotency',
  'idempotency-ttl',
  'idempotency-failure',
  'idempotency-max-entries',
  'idempotency-max-bytes',
  'trust-proxy',
  'idempotency-replicas',
  'backend-errors',
  'mode',
] as const
type Flag = (typeof SERVE_FLAGS)[number]

export const usage =
  'payments-gate serve --target URL --credentials FILE [--listen [HOST:]PORT] [--policies DIR] [--vendor NAME] ' +
  '[--base-path PATH] [--body-limit BYTES] [--timeout MS] [--admin HOST:PORT] [--workers N|auto] ' +
  '[--idempotency memory|off|redis://HOST:PORT[/DB]|redis-sentinel://HOST:PORT[,HOST:PORT...][/DB]#MASTER] [--idempotency-ttl SECONDS] ' +
  '[--idempotency-failure closed|open] [--idempotency-replicas N] [--idempotency-max-entries N] [--idempotency-max-bytes BYTES] ' +
  '[--trust-proxy N] [--backend-errors FILE] [--mode enforce|report]'

/** `--body-limit` reads `PAYMENTS_GATE_BODY_LIMIT`. */
export function envName(flag: string): string {
  return `PAYMENTS_GATE_${flag.toUpperCase().replace(/-/g, '_')}`
}

/** `PORT`, `HOST:PORT` or `[IPv6]:PORT`. */
export function parseAddress(flag: string, value: string): Address {
  const match = /^(?:(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):)?([0-9]{1,5})$/.exec(value)
  const port = Number(match?.[3])
  if (match === null || port > 65535) throw new UsageError(`--${flag} must be PORT or HOST:PORT, got "${value}"`)
  return { host: match[1] ?? match[2], port }
}

function parseTarget(value: string | undefined): URL {
  if (value === undefined) throw new UsageError(`--target is required (usage: ${usage})`)
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw new UsageError(`--target must be a URL, got "${value}"`)
  }
  // The backend sits next to the gateway (same pod): TLS to it would only cost time.
  if (url.protocol !== 'http:') throw new UsageError(`--target must be an http:// URL, got "${value}"`)
  return url
}

function parseWorkers(value: string): number {
  if (value === 'auto') return availableParallelism()
  const workers = parseByteCount('--workers', value)
  if (workers < 1) throw new UsageError('--workers must be at least 1')
  return workers
}

export function parseServeOptions(args: string[], env: Readonly<Record<string, string | undefined>>): ServeOptions {
  const options = Object.fromEntries(SERVE_FLAGS.map((flag) => [flag, { type: 'string' as const }]))
  const { values } = parseArgs({ args, options, strict: true })
  const given = values as Partial<Record<Flag, string>>
  const value = (flag: Flag): string | undefined => given[flag] ?? env[envName(flag)]
  const number = (flag: Flag, fallback: number): number => {
    const text = value(flag)
    return text === undefined ? fallback : parseByteCount(`--${flag}`, text)
  }
  const credentials = value('credentials')
  if (credentials === undefined) throw new UsageError(`--credentials is required (usage: ${usage})`)
  const admin = value('admin')
  const vendor = value('vendor') ?? DEFAULTS.vendor
  // The vendor goes into a media type: RFC 6838 restricted-name characters only.
  if (!/^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*$/.test(vendor)) throw new UsageError(`--vendor must be a media type name, got "${vendor}"`)
  const timeout = number('timeout', DEFAULTS.timeout)
  if (timeout < 1) throw new UsageError('--timeout must be at least 1 ms')
  const idempotencyTtl = number('idempotency-ttl', IDEMPOTENCY_DEFAULTS.ttlSeconds)
  if (idempotencyTtl < 1) throw new UsageError('--idempotency-ttl must be at least 1 second')
  const idempotencyFailure = value('idempotency-failure') ?? IDEMPOTENCY_DEFAULTS.failure
  if (idempotencyFailure !== 'closed' && idempotencyFailure !== 'open') {
    throw new UsageError(`--idempotency-failure must be closed or open, got "${idempotencyFailure}"`)
  }
  const idempotencyMaxEntries = number('idempotency-max-entries', IDEMPOTENCY_DEFAULTS.maxEntries)
  if (idempotencyMaxEntries < 1) throw new UsageError('--idempotency-max-entries must be at least 1')
  const idempotencyMaxBytes = number('idempotency-max-bytes', IDEMPOTENCY_DEFAULTS.maxBytes)
  if (idempotencyMaxBytes < 1) throw new UsageError('--idempotency-max-bytes must be at least 1')
  const mode = value('mode') ?? DEFAULTS.mode
  if (mode !== 'enforce' && mode !== 'report') throw new UsageError(`--mode must be enforce or report, got "${mode}"`)
  return {
    listen: parseAddress('listen', value('listen') ?? String(DEFAULTS.port)),
    target: parseTarget(value('target')),
    policies: value('policies') ?? DEFAULTS.policies,
    credentials,
    vendor,
    basePath: value('base-path') ?? DEFAULTS.basePath,
    bodyLimit: number('body-limit', DEFAULTS.bodyLimit),
    timeout,
    admin: admin === undefined ? undefined : parseAddress('admin', admin),
    workers: parseWorkers(value('workers') ?? '1'),
    idempotency: value('idempotency') ?? IDEMPOTENCY_DEFAULTS.store,
    idempotencyTtl,
    idempotencyFailure,
    idempotencyMaxEntries,
    idempotencyMaxBytes,
    trustProxy: number('trust-proxy', DEFAULTS.trustProxy),
    idempotencyReplicas: number('idempotency-replicas', IDEMPOTENCY_DEFAULTS.replicas),
    backendErrors: value('backend-errors'),
    mode,
  }
}
