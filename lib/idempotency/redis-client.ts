import { createRequire } from 'node:module'
import { isIP } from 'node:net'
import type { Cluster, ClusterOptions, Command, Redis, RedisOptions, SentinelConnector } from 'ioredis'
import type { ErrorEmitter } from 'ioredis/built/connectors/AbstractConnector.js'
import type * as StandaloneModule from 'ioredis/built/connectors/StandaloneConnector.js'
import type { NetStream } from 'ioredis/built/types.js'
import { CodedError, type Wording } from '../coded-error.js'
import { IDEMPOTENCY_DEFAULTS } from '../defaults.js'
import { shownUrl } from '../shown-url.js'

export interface RedisClientOptions {
  /** Longest wait for one command before it rejects, in ms. Default 1000. */
  commandTimeoutMs?: number
  /** Told of every client error (a refused connection, a lost one), so it can be logged and counted; never thrown. */
  onError?: (error: Error) => void
  /** The password (a file's, `--idempotency-password-file`), for a URL that carries none: one with its own is refused. */
  password?: string
  /**
   * A PEM bundle of CA certificates the store's certificate is verified against in place of the system's roots
   * (`--idempotency-ca`), for a TLS URL only: a URL without TLS with one is refused.
   */
  ca?: Buffer
}

/** A client of one server (through Sentinel or not) or of a Redis Cluster. */
export type RedisClient = Redis | Cluster

/** Longest pause between two reconnection attempts, in ms: a Redis back from a restart is used again within it. */
const RECONNECT_MAX_MS = 1000

/** The ports of a Redis and of a Sentinel named without one (Redis's own defaults). */
const REDIS_PORT = 6379
const SENTINEL_PORT = 26379

/**
 * ioredis, loaded by the first client made rather than imported: a gateway on the memory store never
 * uses it, and loading it is a large part of `serve`'s start (docs/performance.md, Start-up).
 */
export function ioredis(): { Redis: typeof Redis; Cluster: typeof Cluster; Command: typeof Command } {
  return createRequire(import.meta.url)('ioredis') as {
    Redis: typeof Redis
    Cluster: typeof Cluster
    Command: typeof Command
  }
}

const ignore = () => {}

/** The connectors every client here is given (`lastingConnectors`). */
interface Connectors {
  readonly standalone: NonNullable<RedisOptions['Connector']>
  readonly sentinel: NonNullable<RedisOptions['Connector']>
}

let connectors: Connectors | undefined

/**
 * ioredis listens for the first 'error' of each connection it opens only (`once`): a second one, as a TLS handshake
 * refused by the certificate check and then by a record read with it, is thrown from the socket and ends the
 * process. These connectors give each connection a listener for as long as it lives, ioredis still reporting the
 * first error: a client's own, its duplicates' and a cluster's nodes' (which take its options), and the connections
 * to the Sentinels a Sentinel client opens as clients of its own.
 */
function lastingConnectors(): Connectors {
  if (connectors !== undefined) return connectors
  const load = createRequire(import.meta.url)
  // ioredis exports the Sentinel connector; the one for a single server is the one its clients make by default.
  const Standalone = (load('ioredis/built/connectors/StandaloneConnector') as typeof StandaloneModule.default).default
  const { SentinelConnector: Sentinel } = load('ioredis') as { SentinelConnector: typeof SentinelConnector }
  const listened = (stream: NetStream) => stream.on('error', ignore)
  // ioredis hands a connector the client's whole options (`ConnectorConstructor` takes them as unknown).
  class LastingStandalone extends Standalone {
    constructor(options: unknown) {
      super(options as ConstructorParameters<typeof Standalone>[0])
    }
    override async connect(emit: ErrorEmitter): Promise<NetStream> {
      return listened(await super.connect(emit))
    }
  }
  class LastingSentinel extends Sentinel {
    constructor(options: unknown) {
      super(options as ConstructorParameters<typeof SentinelConnector>[0])
      // ioredis's own method, which spreads its second argument over the options of each Sentinel's client.
      const self = this as unknown as { connectToSentinel(endpoint: unknown, options?: RedisOptions): Redis }
      const open = self.connectToSentinel.bind(this)
      self.connectToSentinel = (endpoint, options) => open(endpoint, { ...options, Connector: LastingStandalone })
    }
    override async connect(emit: ErrorEmitter): Promise<NetStream> {
      return listened(await super.connect(emit))
    }
  }
  return (connectors = { standalone: LastingStandalone, sentinel: LastingSentinel })
}

/** RFC 3986's userinfo (3.2.1): unreserved and sub-delims characters, `:` and percent-escapes, nothing else. */
const USERINFO = String.raw`(?:[A-Za-z0-9\-._~!$&'()*+,;=:]|%[0-9A-Fa-f]{2})*`
/**
 * A host name or an IPv4 address (RFC 3986's unreserved characters), or an IPv6 address in brackets (its IP-literal:
 * `address` then holds it to node's reading of IPv6; no zone, which a URL cannot carry to ioredis).
 */
const HOST = String.raw`(?:[A-Za-z0-9\-._~]+|\[[0-9A-Fa-f:.]+\])`
const PORT = String.raw`[1-9][0-9]{0,4}`
const DB = String.raw`0|[1-9][0-9]?`
/** A Sentinel's primary group name: RFC 3986's path characters (pchar), so no `?`, `#` or `/`. */
const NAME = String.raw`(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})+`
/**
 * The whole URL is read here, each part by its grammar above, and ioredis is given options, never a URL: a query
 * string (which ioredis would read as options over the client's own, `?enableOfflineQueue=true`), a fragment, or a
 * `/`, `?`, `#`, `@` or `\` in the clear in a password makes a URL none of the forms.
 */
const REDIS_URL = new RegExp(String.raw`^(rediss?)://(?:(${USERINFO})@)?(${HOST}(?::${PORT})?)(?:/(${DB}))?$`)
const SENTINEL_URL = new RegExp(
  String.raw`^(rediss?)-sentinel://(?:(${USERINFO})@)?(${HOST}(?::${PORT})?(?:,${HOST}(?::${PORT})?)*)(?:/(${DB}))?#(${NAME})$`,
)

/** A Redis Cluster's seed nodes: no database (a cluster has only 0), no fragment. */
const CLUSTER_URL = new RegExp(
  String.raw`^(rediss?)-cluster://(?:(${USERINFO})@)?(${HOST}(?::${PORT})?(?:,${HOST}(?::${PORT})?)*)$`,
)

/** The URL forms the Redis store and the shared throttle take (docs/idempotency.md). */
export const REDIS_URL_FORMS =
  'redis://HOST:PORT[/DB], rediss://HOST:PORT[/DB], redis-sentinel://HOST:PORT[,HOST:PORT...][/DB]#MASTER, rediss-sentinel://HOST:PORT[,HOST:PORT...][/DB]#MASTER, redis-cluster://HOST:PORT[,HOST:PORT...], rediss-cluster://HOST:PORT[,HOST:PORT...]'

/** The forms that connect over TLS. */
export const TLS_URL_FORMS =
  'rediss://HOST:PORT[/DB], rediss-sentinel://HOST:PORT[,HOST:PORT...][/DB]#MASTER, rediss-cluster://HOST:PORT[,HOST:PORT...]'

/**
 * A Redis Cluster as a URL names it: seed nodes (the others are discovered), and what every node's connection
 * takes: the user, the password, TLS.
 */
export interface ClusterTarget extends Pick<RedisOptions, 'username' | 'password' | 'tls'> {
  readonly cluster: readonly { readonly host: string; readonly port: number }[]
}

/** What a URL says to connect to: one server (directly or through Sentinel), as ioredis options, or a cluster. */
export type RedisTarget = RedisOptions | ClusterTarget

/** Whether a target is a Redis Cluster's. */
export function isClusterTarget(target: RedisTarget): target is ClusterTarget {
  return 'cluster' in target
}

/** Whether a URL `redisTarget` reads connects over TLS: `rediss://`, `rediss-sentinel://` and `rediss-cluster://`. */
export function redisTls(url: string): boolean {
  const target = redisTarget(url)
  return target !== undefined && usesTls(target)
}

function usesTls(target: RedisTarget): boolean {
  return target.tls !== undefined || (target as RedisOptions).enableTLSForSentinelMode === true
}

/** Why a URL that is none of the forms is refused, when a reason tells more than the forms do. */
export function redisUrlProblem(url: string): string {
  return url.includes('?')
    ? '; a query string (?...) is refused: the URL sets no client option (percent-encode a ? in a password)'
    : ''
}

/**
 * A `HOST[:PORT]` of a URL as ioredis's host and port (`[::1]` as `::1`), `defaultPort` when none is given; undefined
 * past 65535, or for brackets that hold no IPv6 address.
 */
function address(text: string, defaultPort: number): { host: string; port: number } | undefined {
  const close = text.startsWith('[') ? text.indexOf(']') : -1
  const colon = text.indexOf(':', close + 1)
  const port = colon === -1 ? defaultPort : Number(text.slice(colon + 1))
  const host = close === -1 ? (colon === -1 ? text : text.slice(0, colon)) : text.slice(1, close)
  return port > 65535 || (close !== -1 && isIP(host) !== 6) ? undefined : { host, port }
}

/** `HOST[:PORT],...` as ioredis's hosts and ports; undefined when a port is past 65535. */
function addresses(text: string, defaultPort: number): { host: string; port: number }[] | undefined {
  const all = text.split(',').map((one) => address(one, defaultPort))
  return all.includes(undefined) ? undefined : (all as { host: string; port: number }[])
}

/** `USER:PASSWORD` as ioredis's username and password, decoded; an empty part is none. */
function credentials(userinfo: string | undefined): Pick<RedisOptions, 'username' | 'password'> {
  const colon = userinfo?.indexOf(':') ?? -1
  const user = colon === -1 ? userinfo : userinfo?.slice(0, colon)
  const password = colon === -1 ? undefined : userinfo?.slice(colon + 1)
  return {
    username: user ? decodeURIComponent(user) : undefined,
    password: password ? decodeURIComponent(password) : undefined,
  }
}

/**
 * Where a URL says to connect, as ioredis options: `redis://[USER[:PASSWORD]@]HOST[:PORT][/DB]` (`rediss://` with
 * TLS); `redis-sentinel://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...][/DB]#MASTER` (the form of Lettuce and other
 * clients) as ioredis's Sentinel options, the password being the primary's, as in `redis://`; `rediss-sentinel://`
 * alike, with TLS to the Sentinels and to the primary; `redis-cluster://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...]`
 * as a cluster's seed nodes (`rediss-cluster://` with TLS to every node). Undefined for anything else.
 */
export function redisTarget(url: string): RedisTarget | undefined {
  // A `%` escape that is not UTF-8 makes the URL none of the forms (one line), not a URIError with a stack.
  try {
    return readTarget(url)
  } catch {
    return undefined
  }
}

function readTarget(url: string): RedisTarget | undefined {
  const direct = REDIS_URL.exec(url)
  if (direct !== null) {
    const [, scheme, userinfo, hostPort, db] = direct as unknown as [
      string,
      string,
      string | undefined,
      string,
      string | undefined,
    ]
    const at = address(hostPort, REDIS_PORT)
    return at && { ...at, db: Number(db ?? 0), ...credentials(userinfo), ...(scheme === 'rediss' ? { tls: {} } : {}) }
  }
  const cluster = CLUSTER_URL.exec(url)
  if (cluster !== null) {
    const [, scheme, userinfo, hosts] = cluster as unknown as [string, string, string | undefined, string]
    const nodes = addresses(hosts, REDIS_PORT)
    return nodes && { cluster: nodes, ...credentials(userinfo), ...(scheme === 'rediss' ? { tls: {} } : {}) }
  }
  const sentinel = SENTINEL_URL.exec(url)
  if (sentinel === null) return undefined
  const [, scheme, userinfo, hosts, db, name] = sentinel as unknown as [
    string,
    string,
    string | undefined,
    string,
    string | undefined,
    string,
  ]
  const sentinels = addresses(hosts, SENTINEL_PORT)
  if (sentinels === undefined) return undefined
  return {
    sentinels,
    name: decodeURIComponent(name),
    db: Number(db ?? 0),
    // `USER@`, with the password from a file (`--idempotency-password-file`), or `USER:PASSWORD@`.
    ...credentials(userinfo),
    // Reconnect as soon as Sentinel announces a new primary, not only when the old one's connection drops.
    failoverDetector: true,
    // ioredis's switch for TLS to the primary it is told of; `connectRedis` gives the Sentinels and the primary `tls`.
    enableTLSForSentinelMode: scheme === 'rediss',
  }
}

/**
 * An ioredis client that fails fast while Redis is down and recovers without
 * a restart: no offline queue (a command sent while disconnected rejects at
 * once instead of waiting), a timeout on every command, no command sent twice
 * (one in flight when the connection drops fails, by its timeout at the latest), and reconnection
 * attempts forever, at most `RECONNECT_MAX_MS` apart; through Sentinel, it
 * asks the Sentinels for the primary on each attempt, so it follows a
 * failover; on a Redis Cluster, a Cluster client with the same settings (`connectCluster`).
 * Creating it never throws, whether Redis is up or not; a URL
 * `redisTarget` does not read throws a one-line Error (code `EIDEMPOTENCY`).
 */
export function createRedisClient(url: string, options: RedisClientOptions = {}): RedisClient {
  const target = redisTarget(url)
  if (target === undefined) {
    // The code makes it a start-up failure of the CLI: one line, exit 2.
    throw new CodedError(
      'EIDEMPOTENCY',
      (name) => `${name('idempotency')} ${shownUrl(url)} is none of ${REDIS_URL_FORMS}${redisUrlProblem(url)}`,
    )
  }
  return isClusterTarget(target) ? connectCluster(target, options) : connectRedis(target, options)
}

const reconnect = (attempt: number) => Math.min(attempt * 50, RECONNECT_MAX_MS)

/** What every connection the gateway opens takes, whatever the URL said: nothing it says overrides them. */
function failFast(commandTimeout: number) {
  return {
    enableOfflineQueue: false,
    commandTimeout,
    connectTimeout: Math.max(commandTimeout, RECONNECT_MAX_MS),
    maxRetriesPerRequest: 1,
    // A command whose reply a lost connection cut off may have run: never sent again on reconnection (docs/idempotency.md).
    autoResendUnfulfilledCommands: false,
    retryStrategy: reconnect,
  } as const
}

/** The client `createRedisClient` makes, of a target `redisTarget` has already read. */
export function connectRedis(target: RedisOptions, options: RedisClientOptions = {}): Redis {
  const commandTimeout = options.commandTimeoutMs ?? IDEMPOTENCY_DEFAULTS.commandTimeoutMs
  const { Redis } = ioredis()
  const { standalone, sentinel } = lastingConnectors()
  const client = new Redis({
    ...target,
    ...filePassword(target, options.password),
    ...tlsOf(target, options.ca),
    ...failFast(commandTimeout),
    sentinelCommandTimeout: commandTimeout,
    sentinelRetryStrategy: reconnect,
    Connector: target.sentinels === undefined ? standalone : sentinel,
  })
  reportErrors(client, options.onError)
  keepConnecting(client)
  return client
}

/** Another connection to the server `client` reaches (through the Sentinels, if it does so), with its own command timeout. */
export function duplicateRedis(
  client: Redis,
  options: { readonly commandTimeoutMs: number; readonly onError: ((error: Error) => void) | undefined },
): Redis {
  const connection = client.duplicate({ commandTimeout: options.commandTimeoutMs })
  reportErrors(connection, options.onError)
  keepConnecting(connection)
  return connection
}

/** The clients `closeRedisClient` is closing: the only ones meant to end. */
const CLOSED = new WeakSet<RedisClient>()

/**
 * ioredis ends a Sentinel client for good when a failover is announced while the client reconnects: the failover
 * detector of its last connection closes the connector while it waits for a Sentinel's answer, and a connector that
 * fails makes the client end, never to reconnect. Every payment would then get 503 until a restart; the client
 * connects again instead (docs/idempotency-reference.md, `redis-sentinel://`).
 */
function keepConnecting(client: Redis): void {
  // ioredis's options hold `sentinels: null` for a client without Sentinel.
  if (client.options.sentinels)
    client.on('end', () => {
      if (!CLOSED.has(client)) client.connect().catch(() => {})
    })
}

/** Where this process reaches the nodes of a cluster, by the address each announces (a NAT, a port forward). */
export type NatMap = Readonly<Record<string, { readonly host: string; readonly port: number }>>

/** How many times at most a cluster command is sent: enough for a MOVED and an ASK while a slot moves, and a TRYAGAIN. */
const CLUSTER_SENDS = 5

/**
 * The Cluster client `createRedisClient` makes of a cluster's target: every node's connection with the settings
 * above (no offline queue is ioredis's own choice there, while it connects), and for the cluster:
 *
 * - no offline queue: a command sent while no node is known rejects at once;
 * - a command whose connection closed is never sent again (`retryDelayOnFailover: 0`: ioredis would send it to
 *   another node after a pause, and it may have run), nor one answered `CLUSTERDOWN` (a slot without a primary stays
 *   so for seconds: the payment gets 503 at once); `MOVED`, `ASK` and `TRYAGAIN` say that the command did not run, and
 *   are followed, `CLUSTER_SENDS` sends in all (docs/idempotency-reference.md, Redis Cluster);
 * - the nodes reached by the names the URL and the cluster give, never an address ioredis looked up itself, so that
 *   TLS checks the names the nodes' certificates carry (ElastiCache's cluster mode with TLS);
 * - reconnection forever, at most `RECONNECT_MAX_MS` apart.
 *
 * `natMap` maps the addresses the nodes announce to where this process reaches them (a NAT, a port forward).
 */
export function connectCluster(target: ClusterTarget, options: RedisClientOptions = {}, natMap?: NatMap): Cluster {
  const commandTimeout = options.commandTimeoutMs ?? IDEMPOTENCY_DEFAULTS.commandTimeoutMs
  const { cluster: nodes, ...node } = target
  const { enableOfflineQueue, retryStrategy, ...settings } = failFast(commandTimeout)
  const { Cluster } = ioredis()
  const client = new Cluster(
    nodes.map((seed) => ({ ...seed })),
    {
      redisOptions: {
        ...node,
        ...filePassword(node, options.password),
        ...tlsOf(target, options.ca),
        ...settings,
        Connector: lastingConnectors().standalone,
      },
      enableOfflineQueue,
      retryDelayOnFailover: 0,
      retryDelayOnClusterDown: 0,
      maxRedirections: CLUSTER_SENDS,
      slotsRefreshTimeout: commandTimeout,
      clusterRetryStrategy: retryStrategy,
      dnsLookup: (address, callback) => callback(null, address),
      natMap: natMap as ClusterOptions['natMap'],
    },
  )
  reportErrors(client, options.onError)
  // ioredis connects to a node at its first command, and a command sent to it while it connects fails (no offline
  // queue): once the cluster is ready, each primary it names is connected to (`whenReady` waits for them), and each
  // new one as soon as it is known. Not before: ioredis's ready check sends CLUSTER INFO to a node not yet connected.
  const connectPrimaries = () => {
    if (client.status !== 'ready') return
    for (const primary of client.nodes('master')) if (primary.status === 'wait') primary.connect().catch(() => {})
  }
  client.on('ready', connectPrimaries)
  client.on('refresh', connectPrimaries)
  return client
}

/**
 * A connection of its own to one node of `cluster`, as the cluster's own connections to it (user, password, TLS)
 * with the settings above, for the writes that wait for that node's replicas (redis-cluster.ts).
 */
export function connectNode(
  cluster: Cluster,
  node: { host: string; port: number },
  options: { readonly commandTimeoutMs: number; readonly onError: ((error: Error) => void) | undefined },
): Redis {
  const { Redis } = ioredis()
  const client = new Redis({ ...cluster.options.redisOptions, ...node, ...failFast(options.commandTimeoutMs) })
  reportErrors(client, options.onError)
  return client
}

/**
 * The TLS options of a target: none without TLS (and no CA bundle), else the CA bundle given or the system's roots.
 * node verifies every certificate, against the host the client connects to (its name, or an IP address the
 * certificate must list), and nothing here turns that off (docs/idempotency-reference.md, TLS to the store).
 */
function tlsOf(target: RedisTarget, ca: Buffer | undefined): RedisOptions {
  if (!usesTls(target)) {
    if (ca === undefined) return {}
    throw new CodedError(
      'EIDEMPOTENCY',
      (name) =>
        `${name('idempotency')} is not a TLS URL, and a CA bundle (${name('idempotencyCaBundle')}) is only for one of ${TLS_URL_FORMS}`,
    )
  }
  const options = ca === undefined ? {} : { ca }
  // A cluster's nodes share these options, each checked against its own host; none is sent as SNI.
  if (isClusterTarget(target)) return { tls: options }
  if (target.sentinels !== undefined) return { tls: options, sentinelTLS: options }
  // The host named, sent as SNI too, which managed offerings that route by name expect; an IP address is never sent so (RFC 6066, 3).
  const host = target.host as string
  return { tls: isIP(host) === 0 ? { ...options, servername: host } : options }
}

const BOTH_PASSWORDS: Wording = (name) =>
  `${name('idempotency')}: a password in the URL and another in ${name('idempotencyPassword')}; give one`

/** The password of a file, for a URL that names none. */
function filePassword(target: Pick<RedisOptions, 'password'>, password: string | undefined): RedisOptions {
  if (password === undefined) return {}
  if (target.password !== undefined) throw new CodedError('EIDEMPOTENCY', BOTH_PASSWORDS)
  return { password }
}

/**
 * Without a listener, ioredis prints each error on the console; with one, the caller decides. A Cluster client's
 * nodes tell theirs apart (`node error`).
 */
export function reportErrors(client: RedisClient, onError: ((error: Error) => void) | undefined): void {
  client.on('error', (error: Error) => onError?.(error))
  if (client.isCluster) client.on('node error', (error: Error) => onError?.(error))
}

/**
 * Resolves true once the client is connected (a Cluster client, and its connections to every primary it knows),
 * false after `timeoutMs`; never rejects.
 */
export async function whenReady(client: RedisClient, timeoutMs: number): Promise<boolean> {
  const until = performance.now() + timeoutMs
  if (!(await connected(client, timeoutMs))) return false
  if (!client.isCluster) return true
  const primaries = (client as Cluster).nodes('master')
  return (await Promise.all(primaries.map((primary) => connected(primary, until - performance.now())))).every(Boolean)
}

function connected(client: RedisClient, timeoutMs: number): Promise<boolean> {
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

/**
 * Quits cleanly when connected, then stops any reconnection attempt: the way to close a client made here, as a
 * Sentinel client that ends otherwise is started again (`keepConnecting`). A Cluster client is disconnected only: its
 * `quit` would first connect to each node it knows and has not used (the replicas) to say QUIT. Never rejects: a
 * QUIT whose connection is lost or that times out leaves only the connection to close, and a gateway's stop goes on.
 */
export async function closeRedisClient(client: RedisClient): Promise<void> {
  CLOSED.add(client)
  if (client.status === 'ready' && !client.isCluster) await client.quit().catch(() => {})
  client.disconnect()
}
