// The Redis of deploy/redis.yaml beyond one server: its probes against a real server, wedged or not, and a primary,
// a replica and Sentinels on its own ACL file (docs/idempotency.md, Kubernetes; replicas and Sentinel on the
// shipped ACL file), failed over with a payment in flight.
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import { saleBody } from './helpers/fixtures.js'
import { paymentHeaders, type Reply, send, until, waitFor } from './helpers/http.js'
import {
  redisContainer,
  redisPod,
  SECRET_PASSWORDS,
  startManifestRedis,
  type ManifestRedis,
} from './helpers/manifest-redis.js'
import { serverProcess } from './helpers/redis.js'
import { freePort, type Answer } from './helpers/servers.js'
import { startGateway } from './helpers/surfaces.js'

/** Whether a probe's command passed, and how long it took. */
async function runProbe(
  command: string[],
  env: Readonly<Record<string, string>>,
): Promise<{ passed: boolean; ms: number }> {
  const started = Date.now()
  const child = spawn(command[0] as string, command.slice(1), { env: { ...process.env, ...env }, stdio: 'ignore' })
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve))
  return { passed: code === 0, ms: Date.now() - started }
}

// Each test starts its own servers; the failover's waits leave room for the others beside it: two at a time.
t.jobs = 2

t.test(
  'the Redis probes: a command with a timeout, passing on a server that answers and failing within its timeout on a wedged one; liveness needs no password and a minute of failures',
  async (t) => {
    const { livenessProbe: liveness, readinessProbe: readiness } = redisContainer
    t.equal(liveness.tcpSocket, undefined, 'liveness is no TCP check: a wedged server accepts connections')
    for (const [name, probe] of [
      ['liveness', liveness],
      ['readiness', readiness],
    ] as const) {
      const inner = Number(/\btimeout (\d+) /.exec(probe.exec.command.join(' '))?.[1])
      t.ok(inner >= 1 && inner < probe.timeoutSeconds, `${name}: its command's own timeout (${inner} s) ends first`)
    }
    t.ok(liveness.failureThreshold * liveness.periodSeconds >= 60, 'a minute of failures before a restart empties it')
    t.notMatch(liveness.exec.command.join(' '), /PASSWORD|REDISCLI_AUTH|--user/, 'liveness logs in as nobody')

    const redis = await startManifestRedis(t)
    t.ok((await runProbe(redis.probe('livenessProbe'), redis.env)).passed, 'alive')
    t.ok((await runProbe(redis.probe('readinessProbe'), redis.env)).passed, 'ready')
    // A Secret rotated before the server took its new password: not ready, never restarted for it.
    const wrong = join(t.testdir({ password: 'not the password\n' }), 'password')
    t.notOk((await runProbe(redis.probe('readinessProbe'), { ...redis.env, PASSWORD_FILE: wrong })).passed, 'not ready')
    t.ok((await runProbe(redis.probe('livenessProbe'), { ...redis.env, PASSWORD_FILE: wrong })).passed, 'still alive')

    redis.freeze()
    // Both at once: each waits out its command's own timeout.
    const probes = [
      ['livenessProbe', liveness],
      ['readinessProbe', readiness],
    ] as const
    const runs = await Promise.all(probes.map(([name]) => runProbe(redis.probe(name), redis.env)))
    for (const [i, [name, probe]] of probes.entries()) {
      const frozen = runs[i] as { passed: boolean; ms: number }
      t.notOk(frozen.passed, `${name} fails on a server that accepts connections and answers nothing`)
      t.ok(frozen.ms < probe.timeoutSeconds * 1000, `${name}: within its timeout (${frozen.ms} ms)`)
    }
    redis.thaw()
    t.ok(
      await until(async () => (await runProbe(redis.probe('livenessProbe'), redis.env)).passed, 10_000),
      'alive again',
    )
    await redis.kill()
    t.notOk((await runProbe(redis.probe('livenessProbe'), redis.env)).passed, 'a server gone fails it')
  },
)

const MASTER = 'payments-gate-redis'
const PEER_USER = 'payments-gate-sentinel-peer'
const PEER_PASSWORD = 'the Sentinels\' own "peer" pass\\word'

/** The Sentinel configuration of docs/idempotency.md, as a Sentinel there reads it once written. */
const page = readFileSync(new URL('../docs/idempotency.md', import.meta.url), 'utf8')
const documented = /```conf\n([\s\S]*?)```/.exec(page.slice(page.indexOf('### Replicas and Sentinel on the shipped')))

/** A password between `"` in a Redis configuration file. */
const quoted = (text: string) => text.replace(/[\\"]/g, '\\$&')

interface Sentinel {
  readonly port: number
  /** A client of the Sentinel, as the peer user or as no one. */
  client(asPeer: boolean): Redis
}

/** A Sentinel with the documented configuration watching the primary on `primaryPort`; stopped when the test ends. */
async function startSentinel(t: Test, primaryPort: number): Promise<Sentinel> {
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'payments-gate-sentinel-'))
  const text = (documented?.[1] as string)
    .replace(/^port \d+$/m, `port ${port}`)
    .replace(` PRIMARY 6379 `, ` 127.0.0.1 ${primaryPort} `)
    // Down after a second here, not five: the test waits for it.
    .replace(/(down-after-milliseconds \S+) \d+/, '$1 1000')
    .replace('SENTINEL_PASSWORD', quoted(SECRET_PASSWORDS['payments-gate-redis-sentinel'] as string))
    .replace('PEER_PASSWORD_SHA256', createHash('sha256').update(PEER_PASSWORD).digest('hex'))
    .replace('PEER_PASSWORD', quoted(PEER_PASSWORD))
  const config = join(dir, 'sentinel.conf')
  writeFileSync(config, `${text}bind 127.0.0.1\ndir ${dir}\n`)
  const child = serverProcess('redis-server', [config, '--sentinel'])
  const clients: Redis[] = []
  t.teardown(async () => {
    for (const client of clients) client.disconnect()
    if (child.exitCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGKILL')
      await exited
    }
    rmSync(dir, { recursive: true, force: true })
  })
  const client = (asPeer: boolean) => {
    const made = new Redis({
      port,
      host: '127.0.0.1',
      maxRetriesPerRequest: 0,
      // No ready check: it sends INFO, which a client without the peer user may not run.
      enableReadyCheck: false,
      ...(asPeer ? { username: PEER_USER, password: PEER_PASSWORD } : {}),
    })
    made.on('error', () => undefined)
    clients.push(made)
    return made
  }
  const anyone = client(false)
  t.ok(
    await until(async () => (await anyone.ping().catch(() => '')) === 'PONG', 30_000),
    `the Sentinel on ${port} answers`,
  )
  return { port, client }
}

/** Where a Sentinel says the primary is now. */
async function primaryPort(sentinel: Redis): Promise<number> {
  return Number(((await sentinel.call('SENTINEL', 'get-master-addr-by-name', MASTER)) as string[])[1])
}

/**
 * Whether a server of the manifest is a replica with its link to its primary up, asked as the gateways' user through
 * a client of its own that logs in: polled every 100 ms or more, not `until`'s 10 ms.
 */
async function linkedReplica(redis: ManifestRedis, of: number): Promise<boolean> {
  const client = new Redis({
    port: redis.port,
    host: '127.0.0.1',
    username: 'payments-gate',
    password: redis.password,
    maxRetriesPerRequest: 0,
    lazyConnect: true,
  })
  client.on('error', () => undefined)
  try {
    await client.connect()
    const info = await client.info('replication')
    return info.includes('role:slave') && info.includes(`master_port:${of}\r`) && info.includes('master_link_status:up')
  } catch {
    return false
  } finally {
    client.disconnect()
  }
}

let references = 0
const sale = () => ({ ...saleBody(), transactionReference: `ha-${++references}` })
const pay = (url: string, body: object) => send(url, { headers: paymentHeaders(), body })

/** The answer a retry gets once the store answers for the payment (not 503, nor 409 while it is in flight), within 30 s. */
async function settled(url: string, body: object): Promise<Reply> {
  const end = Date.now() + 30_000
  let reply = await pay(url, body)
  while ((reply.status === 503 || reply.status === 409) && Date.now() < end) {
    await waitFor(100)
    reply = await pay(url, body)
  }
  return reply
}

/** The backend's answer names the payment, so a replay shows whose answer it is. */
const naming: Answer = (_req, res, body) => {
  res.writeHead(201, { 'content-type': 'application/vnd.example.payments-v6.hal+json' })
  res.end(JSON.stringify({ outcome: 'authorized', reference: JSON.parse(body.toString()).transactionReference }))
}

t.test(
  "a primary, a replica and two Sentinels on the manifest's ACL file: the replica's link up, a failover with a payment in flight under --idempotency-replicas 1, forwarded once and its retry replayed, the old primary back as a replica, new payments protected",
  async (t) => {
    const primary = await startManifestRedis(t)
    const replica = await startManifestRedis(t, { replicaOf: primary.port })
    // Each step needs the one before: the test ends at the first that fails.
    if (
      !t.ok(
        await until(() => linkedReplica(replica, primary.port), 15_000, 100),
        'the replica logged in as payments-gate-replica: link up',
      )
    )
      return

    const sentinels = [await startSentinel(t, primary.port), await startSentinel(t, primary.port)]
    const peers = sentinels.map((sentinel) => sentinel.client(true))
    const known = async (peer: Redis) =>
      ((await peer.call('SENTINEL', 'replicas', MASTER)) as unknown[]).length === 1 &&
      ((await peer.call('SENTINEL', 'sentinels', MASTER)) as unknown[]).length === 1
    if (
      !t.ok(
        await until(
          async () => (await Promise.all(peers.map((peer) => known(peer).catch(() => false)))).every(Boolean),
          30_000,
        ),
        'each Sentinel logged in to the primary as payments-gate-sentinel, found the replica and the other Sentinel',
      )
    )
      return
    const anonymous = sentinels[0]?.client(false) as Redis
    for (const command of [
      ['SET', MASTER, 'quorum', '1'],
      ['REMOVE', MASTER],
      ['FAILOVER', MASTER],
      ['MONITOR', 'elsewhere', '127.0.0.1', '1', '1'],
    ])
      await t.rejects(
        anonymous.call('SENTINEL', ...command),
        /NOPERM/,
        `a client without the peer user: no SENTINEL ${command[0]}`,
      )

    const addresses = sentinels.map((sentinel) => `127.0.0.1:${sentinel.port}`).join(',')
    // The gateways' user as deploy/payments.yaml has it, its password in the URL here rather than in a file.
    const { url, backend } = await startGateway(t, {
      idempotency: `redis-sentinel://payments-gate:${encodeURIComponent(primary.password)}@${addresses}/0#${MASTER}`,
      idempotencyReplicas: 1,
      answer: naming,
    })
    const before = sale()
    const recorded = await settled(url, before)
    t.equal(recorded.status, 201, 'a payment before the failover')

    // The next payment is held at the backend: its claim is on the replica (WAIT 1) when the primary dies.
    let release!: () => void
    const released = new Promise<void>((resolve) => (release = resolve))
    backend.answer = (req, res, body) => void released.then(() => naming(req, res, body))
    const inFlight = sale()
    const first = pay(url, inFlight)
    if (!t.ok(await until(() => backend.received.length === 2, 10_000), 'the payment is with the backend')) {
      release()
      return
    }
    await primary.kill()
    const watching = sentinels[0]?.client(false) as Redis
    const promoted = t.ok(
      await until(async () => (await primaryPort(watching).catch(() => 0)) === replica.port, 30_000),
      'the Sentinels promoted the replica',
    )
    release()
    if (!promoted) return
    t.equal((await first).status, 201, 'its client gets the answer')
    backend.answer = naming

    const retry = await settled(url, inFlight)
    t.equal(retry.headers['idempotent-replayed'], 'true', 'its retry is replayed, never forwarded')
    if (retry.status < 500) t.equal(retry.text, (await first).text, 'the answer its client got')
    else t.pass('or answered as an unknown outcome')
    const again = await settled(url, before)
    t.equal(again.headers['idempotent-replayed'], 'true', 'the payment recorded before the failover is replayed')
    t.equal(again.text, recorded.text)
    t.equal(backend.received.length, 2, 'each payment forwarded once')

    // The old primary comes back empty: the Sentinels make it a replica of the new one, where it logs in as the replica user.
    const back = await startManifestRedis(t, { port: primary.port })
    if (
      !t.ok(
        await until(() => linkedReplica(back, replica.port), 60_000, 250),
        'the old primary is a replica of the new one, link up',
      )
    )
      return
    const after = sale()
    t.equal((await settled(url, after)).status, 201, 'a new payment, acknowledged by the new replica')
    t.equal((await pay(url, after)).headers['idempotent-replayed'], 'true', 'and protected')
    t.equal(backend.received.length, 3)
  },
)

t.test("the manifest's replication and Sentinel users read no key and run nothing of the gateways'", async (t) => {
  const redis = await startManifestRedis(t)
  for (const [user, secret] of [
    ['payments-gate-replica', 'payments-gate-redis-replica'],
    ['payments-gate-sentinel', 'payments-gate-redis-sentinel'],
  ] as const) {
    // No ready check: it sends INFO, which the replication user may not run.
    const client = new Redis({
      port: redis.port,
      host: '127.0.0.1',
      username: user,
      password: SECRET_PASSWORDS[secret],
      maxRetriesPerRequest: 0,
      enableReadyCheck: false,
    })
    t.teardown(() => client.disconnect())
    t.equal(await client.ping(), 'PONG', `${user} logs in with its own Secret's password`)
    await t.rejects(client.get('payments-gate:idem:x'), /NOPERM/, `${user}: no key`)
    await t.rejects(client.call('EVAL', 'return 1', '0'), /NOPERM/, `${user}: no script`)
    await t.rejects(client.call('ACL', 'LIST'), /NOPERM/, `${user}: no ACL`)
    await t.rejects(
      client.call('CONFIG', 'GET', 'masterauth'),
      /NOPERM/,
      `${user}: no reading of the replication password`,
    )
  }
  const anonymous = new Redis({ port: redis.port, host: '127.0.0.1', lazyConnect: true, enableReadyCheck: false })
  t.teardown(() => anonymous.disconnect())
  await anonymous.connect()
  await t.rejects(
    anonymous.auth('payments-gate-replica', SECRET_PASSWORDS['payments-gate-redis'] as string),
    /WRONGPASS/,
    "each user has its own password: the gateways' is not the replica's",
  )
})

t.test(
  "a replica's copy of its primary fits its data volume, and a replica that starts empty loads it without the disk",
  async (t) => {
    const script = redisContainer.args[0] as string
    // Redis reads `mb` as MiB.
    const maxmemory = Number(/--maxmemory (\d+)mb /.exec(script)?.[1])
    const volume = redisPod.volumes.find((candidate: any) => candidate.name === 'data')
    const limit = Number(/^(\d+)Mi$/.exec(volume.emptyDir.sizeLimit)?.[1])
    t.ok(maxmemory > 0 && limit >= maxmemory, `${limit} MiB of volume for a store of at most ${maxmemory} MiB`)
    t.match(script, / --repl-diskless-load on-empty-db /)
  },
)
