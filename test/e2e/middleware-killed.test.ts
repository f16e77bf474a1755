import t, { type Test } from 'tap'
import { spawnCli, type Running } from '../helpers/cli.js'
import { FINGERPRINT_KEY, saleBody, testCredentials } from '../helpers/fixtures.js'
import { paymentHeaders, type Reply, send, waitFor } from '../helpers/http.js'
import { Handling, protectedServer, SURFACES, type Surface } from '../helpers/protected-apps.js'
import { startRedis } from '../helpers/redis.js'
import { closeServer, listenOnLoopback } from '../helpers/servers.js'
import { testGate } from '../helpers/surfaces.js'

/**
 * An application with the gate as middleware, killed outright (SIGKILL: an OOM kill, a node lost) while
 * its handler runs a payment: with a store the replicas share, the claim it left is never a free key.
 * A retry on another process gets 409 while the claim's window lasts, then the unknown outcome, and no
 * handler runs the payment again (docs/middleware.md, retry protection).
 */

/** The window of the claims: long enough that the first retry after the kill comes inside it on a loaded machine. */
const IN_FLIGHT_SECONDS = 5

/** The application on `surface` in a process of its own, on `redis`; stopped when the test ends. */
async function appProcess(t: Test, surface: Surface, redis: string): Promise<{ port: number; run: Running }> {
  // Killed outright, it never writes its coverage: none is measured.
  const run = spawnCli(
    [surface, redis, String(IN_FLIGHT_SECONDS)],
    { _TAPJS_PROCESSINFO_COVERAGE_: '0' },
    'test/helpers/protected-process.ts',
  )
  t.teardown(async () => {
    run.child.kill('SIGTERM')
    await run.exited
  })
  await run.waitFor(/listening \d+/)
  return { port: Number(/listening (\d+)/.exec(run.output().stdout)?.[1]), run }
}

/**
 * The same application in this process, another process than the killed one, on the same Redis: the replica the
 * client retries on. `started` lists the references its handler began.
 */
async function appHere(t: Test, surface: Surface, redis: string): Promise<{ port: number; started: string[] }> {
  const gate = await testGate(t, {
    credentials: await testCredentials(),
    idempotency: redis,
    idempotencyFingerprintKey: FINGERPRINT_KEY,
    idempotencyInFlight: IN_FLIGHT_SECONDS,
  })
  const started: string[] = []
  const server = await protectedServer(surface, gate, new Handling((reference) => started.push(reference)))
  const port = await listenOnLoopback(server)
  t.teardown(() => closeServer(server))
  return { port, started }
}

function pay(port: number, body: object): Promise<Reply> {
  return send(port, { headers: paymentHeaders(), body })
}

// One Redis for every surface, each paying under its own reference; each waits out the claim's window: side by side.
const redis = await startRedis(t)
t.jobs = SURFACES.length

for (const surface of SURFACES)
  t.test(
    `${surface}: a process killed while its handler runs leaves the unknown outcome; no other process runs the payment again`,
    async (t) => {
      if (redis === undefined) return
      const [a, b] = await Promise.all([appProcess(t, surface, redis.url), appHere(t, surface, redis.url)])
      const reference = `wait-killed-${surface}`
      const payment = saleBody({ transactionReference: reference })
      const first = pay(a.port, payment).catch((error: unknown) => error)
      await a.run.waitFor(new RegExp(`started ${reference}`))
      a.run.child.kill('SIGKILL')
      t.match(await first, { code: 'ECONNRESET' }, 'the client of A lost its connection')

      const fresh = await pay(b.port, payment)
      t.equal(fresh.status, 409, 'while the claim is in its window: in progress')
      let retry = fresh
      for (let attempt = 0; attempt < 200 && retry.status === 409; attempt++) {
        await waitFor(100)
        retry = await pay(b.port, payment)
      }
      t.equal(retry.status, 500, 'after the window: the unknown outcome')
      t.equal(retry.json.errorName, 'internalErrorOccurred')
      t.match(retry.json.message, /outcome of this payment is unknown: it did not finish within its in-flight window/)
      t.equal(retry.headers['idempotent-replayed'], 'true')
      t.equal((await pay(b.port, payment)).status, 500, 'and again')
      const amount = { ...payment.instruction, value: { amount: 999, currency: 'GBP' } }
      const other = await pay(b.port, { ...payment, instruction: amount })
      t.equal(other.status, 422, 'another payment under the reference: already used')
      t.same(b.started, [], "B's handler never ran")
    },
  )
