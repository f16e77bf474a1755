import t from 'tap'
import { checkIdempotencySpec, createIdempotencyStore } from '../../lib/idempotency/create-store.js'
import { MemoryIdempotencyStore } from '../../lib/idempotency/memory.js'
import { RedisIdempotencyStore } from '../../lib/idempotency/redis.js'
import type { Cluster, ClusterOptions } from 'ioredis'
import { closeRedisClient, connectRedis, createRedisClient, redisTarget } from '../../lib/idempotency/redis-client.js'
import { startRedis } from '../helpers/redis.js'
import { OVERSIZED, UNKNOWN } from '../helpers/store-contract.js'

const OPTIONS = { ttlMs: 600_000, inFlightMs: 600_000, oversizedAnswer: OVERSIZED, unknownAnswer: UNKNOWN }

t.test('off is no store; memory is this process', async (t) => {
  t.equal(createIdempotencyStore('off', OPTIONS), undefined)
  t.ok(createIdempotencyStore('memory', OPTIONS) instanceof MemoryIdempotencyStore)
})

t.test('a redis:// spec is a Redis store on it', async (t) => {
  const redis = await startRedis(t)
  if (redis === undefined) return
  for (const spec of [
    redis.url,
    `redis://127.0.0.1:${redis.port}`,
    `redis://:secret@127.0.0.1:${redis.port}/15`,
    'rediss://localhost/1',
  ]) {
    const store = createIdempotencyStore(spec, { ...OPTIONS, commandTimeoutMs: 200, onError: () => {} })
    t.ok(store instanceof RedisIdempotencyStore, spec)
    await store?.close()
  }
  const store = createIdempotencyStore(redis.url, OPTIONS) as RedisIdempotencyStore
  t.teardown(() => store.close())
  t.ok(await store.ready(5000))
  t.equal((await store.claim('k', 'f')).state, 'claimed')
})

t.test('anything else is refused with one line that hides a password', async (t) => {
  const bad = [
    '',
    'Memory',
    'redis',
    'redis://',
    'redis://host:0',
    'redis://host:6379/x',
    'redis://host:6379/100',
    'http://host:6379',
    'redis://:hunter2@host:port',
    'redis-sentinel://host:26379',
    'redis-sentinel://host:26379/0',
    'redis-sentinel://#mymaster',
    'redis-sentinel://host:0#mymaster',
    'redis-sentinel://a:1,#mymaster',
    'redis-sentinel://host:26379/100#mymaster',
    'redis-sentinel://host:26379#my#master',
    'redis-sentinel://:p%zz@host:26379#mymaster',
    'redis-sentinel://u%:p@host:26379#mymaster',
    'redis-sentinel://host:26379#my%master',
    'redis://:pass/word@host:6379',
    'rediss-sentinel://host:26379',
    'redis-sentinels://host:26379#m',
    'redis://host:65536',
    'redis-sentinel://a:1,b:65536#m',
    'redis://host#x',
    'redis://ho st:6379',
    'redis://h\\x:6379',
    'redis://:p%ff@host:6379',
    'redis://:p w@host:6379',
    'redis://:p\\w@host:6379',
    'redis-sentinel://host:26379#m/x',
    'redis-cluster://',
    'redis-cluster://h:7000/0',
    'redis-cluster://h:7000#m',
    'redis-cluster://a:7000,',
    'redis-cluster://a:7000,b:65536',
    'rediss-cluster://h:0',
    'redis-cluster://:p%zz@h:7000',
    'redis-clusters://h:7000',
    'redis-cluster://h:7000/',
  ]
  for (const spec of bad) {
    const refusal = {
      message:
        /^idempotency ".*" is none of memory, off, redis:\/\/HOST:PORT\[\/DB\], rediss:\/\/HOST:PORT\[\/DB\], redis-sentinel:\/\/HOST:PORT\[,HOST:PORT\.\.\.\]\[\/DB\]#MASTER, rediss-sentinel:\/\/HOST:PORT\[,HOST:PORT\.\.\.\]\[\/DB\]#MASTER, redis-cluster:\/\/HOST:PORT\[,HOST:PORT\.\.\.\], rediss-cluster:\/\/HOST:PORT\[,HOST:PORT\.\.\.\]$/,
      code: 'EIDEMPOTENCY',
    }
    t.throws(() => createIdempotencyStore(spec, OPTIONS), refusal, spec)
    t.throws(
      () => checkIdempotencySpec(spec),
      refusal,
      `${spec}: checked alike without a store (serve --workers, in the primary)`,
    )
  }
  for (const spec of [
    'memory',
    'off',
    'redis://127.0.0.1:6379/0',
    'redis-sentinel://s1:26379#m',
    'rediss-sentinel://s1:26379#m',
    'redis-cluster://n1:7000,n2:7001',
    'rediss-cluster://u:p@n1',
  ])
    t.doesNotThrow(() => checkIdempotencySpec(spec), spec)
  t.throws(() => createIdempotencyStore('redis://:hunter2@host:port', OPTIONS), {
    message: /^(?!.*hunter2).*\*\*\*@host:port/,
  })
  for (const spec of [
    'redis-sentinel://:hunter2%zz@host:26379#m',
    'redis://:hunter2/x@y@host:6379',
    'redis-cluster://:hunter2@host:7000/0',
  ])
    t.throws(
      () => createIdempotencyStore(spec, OPTIONS),
      { message: /^(?!.*hunter2).*"redis[-a-z]*:\/\/\*\*\*@host/ },
      spec,
    )
})

t.test(
  'a query string is refused in every URL form, in one line that says so and hides a password: ioredis never reads its options over the client settings',
  async (t) => {
    for (const spec of [
      'redis://h?port=1&password=hunter2&enableOfflineQueue=false',
      'redis://127.0.0.1:6379/0?enableOfflineQueue=true',
      'rediss://:hunter2@h:6379?tls=x',
      'redis://:hunter2@h:6379/0?',
      'redis-sentinel://s1:26379#m?password=hunter2',
      'redis-sentinel://s1?password=hunter2#m',
      'rediss-sentinel://s1:26379/0?autoResendUnfulfilledCommands=true#m',
      'redis://:hun?ter2@h:6379',
      'redis-cluster://:hunter2@n1:7000,n2:7001?password=hunter2',
    ]) {
      const refusal = {
        code: 'EIDEMPOTENCY',
        message: /^(?![^]*(hunter2|ter2))[^\n]* is none of [^\n]*; a query string \(\?\.\.\.\) is refused[^\n]*$/,
      }
      t.throws(() => createIdempotencyStore(spec, OPTIONS), refusal, spec)
      t.throws(() => checkIdempotencySpec(spec), refusal, `${spec}: checked alike without a store`)
      t.throws(() => createRedisClient(spec), refusal, `${spec}: and as createGate's throttleRedis`)
    }
  },
)

t.test(
  'a redis-sentinel:// URL is read as ioredis Sentinel options: the Sentinels, the primary group, its database and password',
  async (t) => {
    t.match(redisTarget('redis-sentinel://s1:26380,s2,10.0.0.3:26381/2#my-primary'), {
      sentinels: [
        { host: 's1', port: 26380 },
        { host: 's2', port: 26379 },
        { host: '10.0.0.3', port: 26381 },
      ],
      name: 'my-primary',
      db: 2,
      username: undefined,
      password: undefined,
      failoverDetector: true,
    })
    t.match(
      redisTarget('redis-sentinel://:p%40ss@s1:26379#m'),
      { db: 0, username: undefined, password: 'p@ss' },
      'a password as in redis://',
    )
    t.match(
      redisTarget('redis-sentinel://app:secret@s1:26379#m'),
      { username: 'app', password: 'secret' },
      'and a user',
    )
    t.same(redisTarget('redis://h:1/0'), { host: 'h', port: 1, db: 0, username: undefined, password: undefined })
    t.same(
      redisTarget('rediss://app:p%3Fw@h'),
      { host: 'h', port: 6379, db: 0, username: 'app', password: 'p?w', tls: {} },
      'redis:// read as ioredis options, never handed to ioredis as a URL',
    )
    t.throws(() => createIdempotencyStore('redis-sentinel://:hunter2@s1:26379/x#m', OPTIONS), {
      message: /^(?!.*hunter2).*\*\*\*@s1/,
    })
    const store = createIdempotencyStore('redis-sentinel://127.0.0.1:1#m', {
      ...OPTIONS,
      commandTimeoutMs: 100,
      onError: () => {},
    })
    t.ok(store instanceof RedisIdempotencyStore, 'a Sentinel spec is a Redis store')
    await store?.close()
  },
)

t.test(
  'a redis-cluster:// URL is read as seed nodes and what every node takes; the client never sends a command twice',
  async (t) => {
    t.same(redisTarget('redis-cluster://n1:7000,n2,10.0.0.3:7002'), {
      cluster: [
        { host: 'n1', port: 7000 },
        { host: 'n2', port: 6379 },
        { host: '10.0.0.3', port: 7002 },
      ],
      username: undefined,
      password: undefined,
    })
    t.same(redisTarget('rediss-cluster://app:p%40ss@n1:7000'), {
      cluster: [{ host: 'n1', port: 7000 }],
      username: 'app',
      password: 'p@ss',
      tls: {},
    })
    const quiet = { commandTimeoutMs: 100, onError: () => {} }
    const cluster = createRedisClient('redis-cluster://app@127.0.0.1:1', { ...quiet, password: 'secret' }) as Cluster
    t.teardown(() => closeRedisClient(cluster))
    t.match(cluster.options, {
      redisOptions: { username: 'app', password: 'secret', commandTimeout: 100, autoResendUnfulfilledCommands: false },
      enableOfflineQueue: false,
      retryDelayOnFailover: 0,
      retryDelayOnClusterDown: 0,
    })
    t.equal(cluster.options.redisOptions?.tls, undefined, 'no TLS without rediss-cluster://')
    const lookup = cluster.options.dnsLookup as NonNullable<ClusterOptions['dnsLookup']>
    lookup('cache.example', (error, address) =>
      t.same([error, address], [null, 'cache.example'], 'names kept as names'),
    )
    t.throws(() => createRedisClient('redis-cluster://:own@127.0.0.1:1', { ...quiet, password: 'secret' }), {
      code: 'EIDEMPOTENCY',
      message: 'idempotency: a password in the URL and another in idempotencyPassword; give one',
    })
    const store = createIdempotencyStore('redis-cluster://127.0.0.1:1', { ...OPTIONS, ...quiet })
    t.ok(
      store instanceof RedisIdempotencyStore && store.redis.isCluster,
      'a cluster spec is a Redis store on a Cluster client',
    )
    await store?.close()
  },
)

t.test(
  'a password from a file, for a URL that carries none, in every form; a URL with its own is refused',
  async (t) => {
    for (const url of ['redis://:own@host:6379', 'redis-sentinel://user:own@host:26379#primary'])
      t.throws(() => connectRedis(redisTarget(url) as Parameters<typeof connectRedis>[0], { password: 'secret' }), {
        code: 'EIDEMPOTENCY',
        message: 'idempotency: a password in the URL and another in idempotencyPassword; give one',
      })
    const sentinel = connectRedis(
      redisTarget('redis-sentinel://user@127.0.0.1:9#primary') as Parameters<typeof connectRedis>[0],
      {
        password: 'secret',
      },
    )
    t.teardown(() => closeRedisClient(sentinel))
    t.match(sentinel.options, { password: 'secret', username: 'user' }, 'through Sentinel: the primary gets it')
    const plain = connectRedis(redisTarget('redis://user@127.0.0.1:9/0') as Parameters<typeof connectRedis>[0], {
      password: 'secret',
    })
    t.teardown(() => plain.disconnect())
    t.match(plain.options, { password: 'secret', username: 'user' })
    plain.on('error', () => undefined)
    sentinel.on('error', () => undefined)
  },
)
