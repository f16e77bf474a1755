import { Agent } from 'node:http'
import { createServer, type AddressInfo, type Socket } from 'node:net'
import t, { type Test } from 'tap'
import { reloadSignal } from '../../lib/cli/signals.js'
import { boundPorts, COVERED, type Running, spawnCli } from '../helpers/cli.js'
import { saleBody, writeCredentials, writeFingerprintKey } from '../helpers/fixtures.js'
import { paymentHeaders, send, until, type Reply } from '../helpers/http.js'
import { freePort, poll, startBackend } from '../helpers/servers.js'

/** `serve` and its shutdown (docs/deployment-reference.md, stopping) in real processes, with signals sent to them. */
const credentials = await writeCredentials(t.testdir())
const backend = await startBackend()
t.teardown(() => backend.close())
// Most of these tests wait on a timer (a shutdown delay, a slow backend), each with a gateway process of its own: three
// at a time. Only the first sends payments to this backend, and counts them.
t.jobs = 3

interface Gateway {
  readonly run: Running
  readonly url: string
  readonly readyz: string
}

async function serve(t: Test, target: string, args: string[]): Promise<Gateway> {
  const admin = await freePort()
  const run = spawnCli(
    [
      'serve',
      '--listen',
      '127.0.0.1:0',
      '--target',
      target,
      '--credentials',
      credentials,
      '--admin',
      `127.0.0.1:${admin}`,
      ...args,
    ],
    COVERED,
  )
  t.teardown(() => run.child.kill('SIGKILL'))
  const { listen: port } = await boundPorts(run)
  return { run, url: `http://127.0.0.1:${port}`, readyz: `http://127.0.0.1:${admin}/readyz` }
}

let reference = 0
/** A sale with a fresh transactionReference, on `agent`'s connections or a new one. */
function pay(url: string, agent: Agent | false = false): Promise<Reply> {
  return send(
    url,
    { headers: paymentHeaders(), body: { ...saleBody(), transactionReference: `signals-${++reference}` } },
    agent,
  )
}

t.test(
  'SIGTERM under load: readyz 503 at once, every request served through the delay with Connection: close, new connections accepted; a second SIGTERM drains, exit 0',
  async (t) => {
    const { run, url, readyz } = await serve(t, backend.url, ['--shutdown-delay', '600'])
    const agent = new Agent({ keepAlive: true, maxSockets: 4 })
    t.teardown(() => agent.destroy())
    let withdrawn = false
    const replies: { reply: Reply; afterWithdrawn: boolean; fresh: boolean }[] = []
    const received = backend.received.length
    /** One client: bounded in count; it stops once it has sent ten requests after /readyz was seen to say 503. */
    async function client(id: number): Promise<void> {
      let after = 0
      for (let i = 0; i < 300 && after < 10; i++) {
        const afterWithdrawn = withdrawn
        if (afterWithdrawn) after++
        // Every third request after the signal on a connection of its own: new connections must still be accepted.
        const fresh = afterWithdrawn && i % 3 === 0
        replies.push({ reply: await pay(url, fresh ? false : agent), afterWithdrawn, fresh })
        if (id === 0 && i === 5) run.child.kill('SIGTERM')
      }
    }
    const watcher = poll(readyz, 503).then(() => (withdrawn = true))
    await Promise.all([0, 1, 2, 3].map(client))
    await watcher
    t.equal(run.child.exitCode, null, 'still serving: the delay is not over')
    t.same(new Set(replies.map(({ reply }) => reply.status)), new Set([201]), 'no request failed')
    const after = replies.filter(({ afterWithdrawn }) => afterWithdrawn)
    t.ok(after.length >= 40, 'requests sent after /readyz turned 503')
    t.same(
      new Set(after.map(({ reply }) => reply.headers.connection)),
      new Set(['close']),
      'each answered with Connection: close',
    )
    t.ok(
      after.some(({ fresh }) => fresh),
      'on new connections too',
    )
    t.equal(backend.received.length - received, replies.length, 'each payment forwarded once')
    run.child.kill('SIGTERM')
    t.equal(await run.exited, 0)
    const { stdout } = run.output()
    t.match(
      stdout,
      /"shutdownDelay":600,"msg":"shutting down"[^]*"drainTimeout":95,"msg":"draining"[^]*"msg":"stopped"/,
    )
  },
)

t.test('the delay ends on its own, then the drain, then exit 0', async (t) => {
  const { run, readyz } = await serve(t, backend.url, [])
  run.child.kill('SIGTERM')
  await poll(readyz, 503)
  t.equal(await run.exited, 0)
  t.match(run.output().stdout, /"shutdownDelay":5,"msg":"shutting down"[^]*"msg":"draining"/)
})

t.test(
  'SIGINT skips the delay; a payment still at the backend when the drain timeout ends gets the unknown outcome, and the process exits 0',
  async (t) => {
    const silent = await startBackend(() => undefined)
    t.teardown(() => silent.close())
    // A delay no test outlasts: the process ends only because SIGINT skipped it.
    const { run, url } = await serve(t, silent.url, ['--shutdown-delay', '600', '--drain-timeout', '1'])
    const reply = pay(url)
    t.ok(await until(() => silent.received.length === 1, 60_000))
    run.child.kill('SIGINT')
    t.match(await reply, {
      status: 500,
      json: { errorName: 'internalErrorOccurred', message: /^The outcome of this payment is unknown/ },
    })
    t.equal(await run.exited, 0)
    t.match(run.output().stdout, /"drainTimeout":1,"msg":"draining"/)
  },
)

t.test(
  'the default drain lets a payment finish that takes longer than --timeout + 1 s, each of its steps within --timeout: no unknown outcome',
  async (t) => {
    // Headers, then two more pieces of body, each 1.5 s after the last: 4.5 s in all, under a 2 s --timeout.
    const slow = await startBackend((_req, res) => {
      const step = (then: () => void) => setTimeout(then, 1500)
      step(() => {
        res.writeHead(201, { 'content-type': 'application/vnd.example.payments-v6.hal+json' }).write('{"status"')
        step(() => {
          res.write(':"captured"')
          step(() => res.end('}'))
        })
      })
    })
    t.teardown(() => slow.close())
    const { run, url } = await serve(t, slow.url, ['--shutdown-delay', '0', '--timeout', '2000'])
    const reply = pay(url)
    t.ok(await until(() => slow.received.length === 1, 60_000))
    run.child.kill('SIGTERM')
    t.match(await reply, { status: 201, json: { status: 'captured' } })
    t.equal(await run.exited, 0)
    t.match(
      run.output().stdout,
      /"drainTimeout":11,"msg":"draining"/,
      'three times --timeout and 5 s: its in-flight window',
    )
  },
)

t.test(
  'SIGTERM during start-up ends the process, even while start-up waits on a store that never answers',
  async (t) => {
    // A FIFO named as a file is refused at once (test/cli/startup.test.ts): a Redis that accepts and stays
    // silent is what keeps a start-up waiting now, for its command timeout (docs/idempotency.md).
    const silent = createServer(() => undefined)
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
    t.teardown(() => silent.close())
    const sockets: Socket[] = []
    silent.on('connection', (socket) => sockets.push(socket))
    t.teardown(() => sockets.forEach((socket) => socket.destroy()))
    const key = await writeFingerprintKey(t.testdir())
    const admin = await freePort()
    const run = spawnCli(
      [
        'serve',
        '--target',
        backend.url,
        '--credentials',
        credentials,
        '--admin',
        `127.0.0.1:${admin}`,
        '--idempotency',
        `redis://127.0.0.1:${(silent.address() as AddressInfo).port}`,
        '--idempotency-fingerprint-key',
        key,
      ],
      COVERED,
    )
    t.teardown(() => run.child.kill('SIGKILL'))
    // The admin listener answers "not yet" while the store is awaited.
    await poll(`http://127.0.0.1:${admin}/readyz`, 503)
    run.child.kill('SIGTERM')
    t.equal(await run.exited, null)
    t.equal(run.child.signalCode, 'SIGTERM', 'ended by the signal it was sent')
  },
)

t.test(
  '--workers: SIGTERM while the primary still reads its files ends it at once, before any worker is forked',
  async (t) => {
    // The credentials file sits on a disk that takes a minute to answer (test/helpers/slow-disk.mjs).
    const slowDisk = new URL('../helpers/slow-disk.mjs', import.meta.url).href
    const run = spawnCli(
      ['serve', '--workers', '2', '--idempotency', 'off', '--target', backend.url, '--credentials', credentials],
      {
        NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${slowDisk}`,
        SLOW_DISK_FILE: credentials,
        ...COVERED,
      },
    )
    t.teardown(() => run.child.kill('SIGKILL'))
    await run.waitFor(/slow disk: /)
    run.child.kill('SIGTERM')
    // Far below the disk's minute: the signal is not held until the workers are forked.
    t.ok(await until(() => run.child.signalCode !== null, 20_000), 'ended while its disk was still silent')
    t.equal(run.child.signalCode, 'SIGTERM', 'ended by the signal it was sent')
    t.notMatch(run.output().stdout, /workers started/, 'no worker forked')
  },
)

t.test('SIGHUP: ignored until a reload is given, then runs it each time; the process stays', async (t) => {
  const before = process.listenerCount('SIGHUP')
  const onReload = reloadSignal()
  t.equal(process.listenerCount('SIGHUP'), before + 1, 'listening from the start, so node does not end the process')
  process.emit('SIGHUP', 'SIGHUP')
  let reloads = 0
  onReload(() => reloads++)
  process.emit('SIGHUP', 'SIGHUP')
  process.emit('SIGHUP', 'SIGHUP')
  t.equal(reloads, 2, 'a SIGHUP before the reload was given did nothing')
})
