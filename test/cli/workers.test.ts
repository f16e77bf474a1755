import { spawnSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import t from 'tap'
import { closedSince, COVERED, openResources, runCliOnce, spawnCli } from '../helpers/cli.js'
import { saleBody, writeCredentials } from '../helpers/fixtures.js'
import { paymentHeaders, send, until } from '../helpers/http.js'
import { freePort, poll, startBackend, takenPort } from '../helpers/servers.js'

/** `serve --workers N` as a real process tree: slow to start under the TypeScript loader, so few cases. */
const credentials = await writeCredentials(t.testdir())
const backend = await startBackend()
t.teardown(() => backend.close())

// In this process, alone: it counts what this process holds open. A primary refused in its start-up exits 2 in a real
// process of its own in test/cli/startup.test.ts; this refusal comes later in the same start-up.
await t.test('--workers: an admin port in use stops the primary before any worker starts', async (t) => {
  const taken = await takenPort(t)
  const open = openResources()
  const run = await runCliOnce([
    'serve',
    '--workers',
    '2',
    '--idempotency',
    'off',
    '--target',
    backend.url,
    '--credentials',
    credentials,
    '--admin',
    `127.0.0.1:${taken}`,
  ])
  t.equal(run.code, 2)
  t.equal(
    run.stderr,
    `payments-gate serve: --admin: 127.0.0.1:${taken} is in use; stop what listens there or give another port\n`,
  )
  t.equal(run.stdout, '', 'no worker started, nothing logged')
  t.ok(await until(() => closedSince(open)), 'all it opened is closed')
})

// Each test below has its own process tree and ports, and none counts what the shared backend received: two at a time.
t.jobs = 2

t.test(
  '--workers: N processes on one port, admin with summed metrics, a dead worker replaced, a refused fork retried; SIGTERM turns readyz 503, the workers keep serving through the delay with Connection: close; a second SIGTERM drains all, exit 0',
  async (t) => {
    const [listen, admin] = [await freePort(), await freePort()]
    const run = spawnCli(
      [
        'serve',
        '--workers',
        '2',
        '--idempotency',
        'off',
        '--listen',
        `127.0.0.1:${listen}`,
        '--target',
        backend.url,
        '--credentials',
        credentials,
        '--admin',
        `127.0.0.1:${admin}`,
        '--shutdown-delay',
        '600',
      ],
      { PAYMENTS_GATE_IDEMPOTENCY_STORE: 'redis://127.0.0.1:1', ...COVERED },
    )
    t.teardown(() => run.child.kill('SIGKILL'))
    await poll(`http://127.0.0.1:${admin}/readyz`, 200)
    for (let i = 0; i < 4; i++)
      t.equal((await send(`http://127.0.0.1:${listen}`, { headers: paymentHeaders(), body: saleBody() })).status, 201)
    const metrics = await (await fetch(`http://127.0.0.1:${admin}/metrics`)).text()
    t.match(metrics, /payments_gate_requests_total\{[^}]*status="201"[^}]*} 4/)
    // Log lines are written in batches, up to 200 ms after they were logged (docs/logs-and-metrics.md): wait for both.
    await run.waitFor(/("msg":"gateway listening"[^]*){2}/)
    const pids = [...run.output().stdout.matchAll(/"pid":(\d+),"listen"/g)].map((match) => Number(match[1]))
    t.equal(pids.length, 2)
    t.equal(
      run.output().stdout.split('PAYMENTS_GATE_IDEMPOTENCY_STORE is not a variable of serve').length,
      2,
      'an unknown variable warned about once, by the primary',
    )
    // SIGHUP to the primary reaches every worker, and stops none of them.
    run.child.kill('SIGHUP')
    await run.waitFor(/("msg":"SIGHUP: reloading policies and credentials"[^]*){2}/)
    const reloaded = [...run.output().stdout.matchAll(/"pid":(\d+),"msg":"SIGHUP: reloading/g)].map((match) =>
      Number(match[1]),
    )
    t.same(reloaded.sort(), [...pids].sort(), 'each worker reloaded once')
    t.equal(run.child.exitCode, null)
    t.equal(
      (
        await send(`http://127.0.0.1:${listen}`, {
          headers: paymentHeaders(),
          body: saleBody({ transactionReference: 'after-sighup' }),
        })
      ).status,
      201,
    )
    process.kill(pids[0] as number, 'SIGKILL')
    await run.waitFor(/"msg":"worker exited"/)
    await run.waitFor(/("msg":"gateway listening"[^]*){3}/)
    await poll(`http://127.0.0.1:${admin}/readyz`, 200)

    // A fork the system refuses: the primary held to the descriptors it has open (its soft limit at its lowest free
    // one), then a worker killed. The fork in its place fails (EMFILE, told by node's cluster as an `error` event with
    // no `exit`); the primary lives, says so, and forks again once the limit is lifted.
    const primary = run.child.pid as number
    const limits = () => readFileSync(`/proc/${primary}/limits`, 'utf8')
    const [, soft] = /^Max open files\s+(\d+)/m.exec(limits()) as RegExpExecArray
    const open = new Set(readdirSync(`/proc/${primary}/fd`).map(Number))
    let lowestFree = 0
    while (open.has(lowestFree)) lowestFree++
    const prlimit = (nofile: string) =>
      t.equal(spawnSync('prlimit', ['--pid', String(primary), `--nofile=${nofile}:`]).status, 0, `prlimit ${nofile}`)
    prlimit(String(lowestFree))
    process.kill(pids[1] as number, 'SIGKILL')
    await run.waitFor(/"code":"EMFILE"[^\n]*"msg":"worker failed"/)
    prlimit(soft as string)
    t.match(limits(), new RegExp(`^Max open files\\s+${soft}\\s`, 'm'), 'the limit lifted')
    await run.waitFor(/("msg":"gateway listening"[^]*){4}/)
    await poll(`http://127.0.0.1:${admin}/readyz`, 200)
    t.equal(run.child.exitCode, null, 'the primary lived through the refused fork')

    // The same tree stopped: the delay first, every worker serving through it, then the drain.
    run.child.kill('SIGTERM')
    await poll(`http://127.0.0.1:${admin}/readyz`, 503)
    // The workers have the signal once they say so; log lines reach stdout within 200 ms (docs/logs-and-metrics.md).
    await run.waitFor(/("msg":"shutting down"[^]*){2}/)
    for (let i = 0; i < 6; i++) {
      const reply = await send(`http://127.0.0.1:${listen}`, {
        headers: paymentHeaders(),
        body: { ...saleBody(), transactionReference: `workers-delay-${i}` },
      })
      t.same([reply.status, reply.headers.connection], [201, 'close'])
    }
    run.child.kill('SIGTERM')
    t.equal(await run.exited, 0)
    t.match(run.output().stdout, /("msg":"draining"[^]*){2}/)
  },
)

t.test('--workers: workers that cannot listen stop the primary with exit 2', async (t) => {
  const port = await takenPort(t)
  const run = spawnCli(
    [
      'serve',
      '--workers',
      '2',
      '--idempotency',
      'off',
      '--listen',
      `127.0.0.1:${port}`,
      '--target',
      backend.url,
      '--credentials',
      credentials,
    ],
    COVERED,
  )
  t.equal(await run.exited, 2)
  t.equal(
    run.output().stderr,
    `payments-gate serve: --listen: 127.0.0.1:${port} is in use; stop what listens there or give another port\n`,
    'said once, not once a worker',
  )
})

t.test(
  'under another cluster primary (PM2 cluster mode): a worker that cannot start says why itself, exit 2',
  async (t) => {
    const run = spawnCli(
      ['serve', '--listen', '127.0.0.1:0', '--target', backend.url, '--credentials', credentials],
      COVERED,
      'test/helpers/foreign-primary.ts',
    )
    t.equal(await run.exited, 2)
    t.equal(
      run.output().stderr,
      "payments-gate serve: --idempotency memory in a cluster worker (node:cluster, PM2's cluster mode): each worker would keep its own store and run a retry again; give --idempotency a Redis URL that every worker shares (or off)\n",
      'the default store refused in a worker, where serve --workers sets none',
    )
  },
)
