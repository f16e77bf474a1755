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

/**
 * The application on every surface in one process, on `redis`, each surface a server of its own; stopped when the
 * test ends. It is killed once the handler of every surface runs its payment.
 */
async function appProcess(t: Test, redis: string): Promise<{ ports: Record<Surface, number>; run: Running }> {
  // Outside the coverage, as every spawnCli child: killed outright, it would never write it anyway.
  const run = spawnCli([redis, String(IN_FLIGHT_SECONDS), ...SURFACES], {}, 'test/helpers/protected-process.ts')
  t.teardown(async () => {
    run.child.kill('SIGTERM')
    await run.exited
  })
  await Promise.all(SURFACES.map((surface) => run.waitFor(new RegExp(`listening ${surface} \\d+`))))
  const port = (surface: Surface) => Number(new RegExp(`listening ${surface} (\\d+)`).exec(run.output().stdout)?.[1])
  return {
    ports: Object.fromEntries(SURFACES.map((surface) => [surface, port(surface)])) as Record<Surface, number>,
    run,
  }
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
// One process A holds the four applications; it is killed once the four handlers run.
const redis = await startRedis(t)
const a = redis === undefined ? undefined : await appProcess(t, redis.url)
const reference = (surface: Surface) => `wait-killed-${surface}`
const allStarted = Promise.all(SURFACES.map((surface) => a?.run.waitFor(new RegExp(`started ${reference(surface)}`))))
t.jobs = SURFACES.length

for (const surface of SURFACES)
  t.test(
    `${surface}: a process killed while its handler runs leaves the unknown outcome; no other process runs the payment again`,
    async (t) => {
      if (redis === undefined || a === undefined) return
      const b = await appHere(t, surface, redis.url)
      const payment = saleBody({ transactionReference: reference(surface) })
      const first = pay(a.ports[surface], payment).catch((error: unknown) => error)
      await allStarted
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
