import { mkdir, rename, symlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { hashPassword } from '../../lib/credentials/hash.js'
import { boundPorts, COVERED, type Running, spawnCli } from '../helpers/cli.js'
import { basic, policyJson, saleBody, TEST_COST } from '../helpers/fixtures.js'
import { keepAliveSender, paymentHeaders, until, type Reply } from '../helpers/http.js'
import { freePort, startBackend } from '../helpers/servers.js'

/**
 * docs/credentials.md and docs/policies.md, hot reload, on the real `serve`
 * process: a password rotated while a load runs, and SIGHUP under load.
 */
const backend = await startBackend()
t.teardown(() => backend.close())

async function credentialsJson(users: Record<string, string>): Promise<string> {
  const list = await Promise.all(
    Object.entries(users).map(async ([username, password]) => ({
      username,
      password: await hashPassword(password, TEST_COST),
      entities: ['default'],
    })),
  )
  return JSON.stringify({ users: list })
}

/** Replaces a file at once, as editors and `kubectl cp` do: written aside, then renamed over it. */
async function replaceFile(file: string, text: string): Promise<void> {
  await writeFile(`${file}.tmp`, text)
  await rename(`${file}.tmp`, file)
}

interface Gateway {
  readonly run: Running
  readonly url: string
  /** The admin listener's /metrics, as text. */
  metrics(): Promise<string>
}

async function serve(t: Test, credentials: string, policies: string): Promise<Gateway> {
  const admin = await freePort()
  const run = spawnCli(
    [
      'serve',
      '--listen',
      '127.0.0.1:0',
      '--target',
      backend.url,
      '--credentials',
      credentials,
      '--policies',
      policies,
      '--admin',
      `127.0.0.1:${admin}`,
      '--shutdown-delay',
      '0',
    ],
    COVERED,
  )
  t.teardown(() => void run.child.kill('SIGKILL'))
  const { listen: port } = await boundPorts(run)
  return {
    run,
    url: `http://127.0.0.1:${port}`,
    metrics: async () => (await fetch(`http://127.0.0.1:${admin}/metrics`)).text(),
  }
}

/** The value of one series of the metrics text, 0 when absent. */
function valueOf(text: string, series: string): number {
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `))
  return line === undefined ? 0 : Number(line.slice(series.length + 1))
}

let reference = 0
/** One sale as `username`, with a fresh transactionReference. */
function sale(post: ReturnType<typeof keepAliveSender>, username: string, password: string): Promise<Reply> {
  return post({
    headers: paymentHeaders({ authorization: basic(username, password) }),
    body: saleBody({ transactionReference: `reload-${reference++}` }),
  })
}

/** A load running: every status so far, or the error, and its end. */
interface Load {
  readonly statuses: (number | string)[]
  readonly finished: Promise<(number | string)[]>
}

/** Sales as `username` from a few concurrent loops until `done()`, bounded in count and time. */
function load(post: ReturnType<typeof keepAliveSender>, username: string, password: string, done: () => boolean): Load {
  const statuses: (number | string)[] = []
  const deadline = Date.now() + 20_000
  const loop = async () => {
    while (!done() && statuses.length < 5000 && Date.now() < deadline) {
      statuses.push(
        await sale(post, username, password).then(
          (reply) => reply.status,
          (error: Error) => error.message,
        ),
      )
    }
  }
  return { statuses, finished: Promise.all([loop(), loop(), loop()]).then(() => statuses) }
}

/** Lets the load answer `count` more requests from now: its requests are then known to span what came before. */
async function moreOf(steady: Load, count: number): Promise<boolean> {
  const mark = steady.statuses.length
  return until(() => steady.statuses.length >= mark + count, 10_000)
}

t.test(
  'a password rotated while a load runs: no request of another user fails; the old password is refused after the switch, the new one accepted',
  async (t) => {
    const dir = t.testdir({ policies: { 'default.json': policyJson('default') } })
    const file = join(dir, 'credentials.json')
    await writeFile(file, await credentialsJson({ 'shop-1': 'old password', steady: 'unchanged' }))
    const gateway = await serve(t, file, join(dir, 'policies'))
    const post = keepAliveSender(t, gateway.url)
    let stopped = false
    const steady = load(post, 'steady', 'unchanged', () => stopped)

    // The rotated user's client: the old password until the file is replaced.
    const before: number[] = []
    for (let i = 0; i < 20; i++) before.push((await sale(post, 'shop-1', 'old password')).status)
    const rotated = await credentialsJson({ 'shop-1': 'new password', steady: 'unchanged' })
    await replaceFile(file, rotated)
    // Once the gateway logged the switch, the file's users are in force: it happened before that line.
    await gateway.run.waitFor(/"msg":"credentials reloaded"/)
    const after: number[] = []
    for (let i = 0; i < 20; i++) after.push((await sale(post, 'shop-1', 'new password')).status)
    // A few only: each is a failed login, and ten within a minute would lock the username out (docs/credentials.md).
    const old: number[] = []
    for (let i = 0; i < 3; i++) old.push((await sale(post, 'shop-1', 'old password')).status)
    t.ok(await moreOf(steady, 10), 'the other user paid on after the switch')
    stopped = true
    const statuses = await steady.finished

    t.same(new Set(before), new Set([201]), 'the old password is accepted before the switch')
    t.same(new Set(after), new Set([201]), 'the new password is accepted after it')
    t.same(old, [401, 401, 401], 'the old password is refused after it, although its check was cached')
    t.ok(statuses.length > 0)
    t.same(new Set(statuses), new Set([201]), `every request of the other user passed (${statuses.length})`)
    const metrics = await gateway.metrics()
    t.equal(valueOf(metrics, 'payments_gate_credentials_reloads_total{outcome="ok"}'), 1, 'one reload counted')
    t.equal(valueOf(metrics, 'payments_gate_credentials_file_refused'), 0)
    gateway.run.child.kill('SIGTERM')
    t.equal(await gateway.run.exited, 0)
  },
)

t.test(
  'SIGHUP under load: nothing fails, the process stays; a refused file is counted; a changed policy applies at once',
  async (t) => {
    // The policy folder is a symlink swapped to a new folder: the watcher watches the old one, so only
    // SIGHUP (or the re-scan, within a second) can apply the new policy.
    const dir = t.testdir({
      v1: { 'default.json': policyJson('default', { currencies: ['GBP'] }) },
      v2: { 'default.json': policyJson('default', { currencies: ['EUR'] }) },
    })
    await symlink('v1', join(dir, 'policies'))
    const secret = join(dir, 'secret')
    await mkdir(secret)
    const file = join(secret, 'credentials.json')
    const valid = await credentialsJson({ steady: 'unchanged' })
    await writeFile(file, valid)
    const gateway = await serve(t, file, join(dir, 'policies'))
    const post = keepAliveSender(t, gateway.url)
    let stopped = false
    const steady = load(post, 'steady', 'unchanged', () => stopped)

    const sighups = () =>
      gateway.run.output().stdout.split('"msg":"SIGHUP: reloading policies and credentials"').length - 1
    for (let i = 1; i <= 5; i++) {
      gateway.run.child.kill('SIGHUP')
      // Each signal handled before the next: the kernel merges a signal sent while the same one is pending.
      t.ok(await until(() => sighups() >= i), `SIGHUP ${i} handled`)
      t.ok(await moreOf(steady, 3), `payments answered after SIGHUP ${i}`)
    }
    t.ok(
      await until(
        async () => valueOf(await gateway.metrics(), 'payments_gate_policy_reloads_total{outcome="ok"}') >= 1,
      ),
      'a SIGHUP is a reload, even when nothing changed',
    )
    t.ok(valueOf(await gateway.metrics(), 'payments_gate_credentials_reloads_total{outcome="ok"}') >= 1)

    // A broken credentials file: refused by the watcher once, and again by a SIGHUP; the last good users stay.
    await replaceFile(file, '{"users": "oops"}')
    t.ok(
      await until(
        async () => valueOf(await gateway.metrics(), 'payments_gate_credentials_reloads_total{outcome="failed"}') === 1,
      ),
    )
    t.equal(valueOf(await gateway.metrics(), 'payments_gate_credentials_file_refused'), 1)
    gateway.run.child.kill('SIGHUP')
    t.ok(
      await until(
        async () => valueOf(await gateway.metrics(), 'payments_gate_credentials_reloads_total{outcome="failed"}') === 2,
      ),
      'counted as a failed reload',
    )
    await gateway.run.waitFor(/"msg":"credentials file refused, its last good users stay in force"/)
    t.ok(await moreOf(steady, 10), 'payments answered after the refused file')
    stopped = true
    const statuses = await steady.finished
    t.ok(statuses.length > 0)
    t.same(new Set(statuses), new Set([201]), `every request passed (${statuses.length})`)
    t.equal(gateway.run.child.exitCode, null, 'still running')

    const gbpSale = () => sale(post, 'steady', 'unchanged')
    t.equal((await gbpSale()).status, 201, 'GBP allowed by the policy in force')
    await symlink('v2', join(dir, 'policies.tmp'))
    await rename(join(dir, 'policies.tmp'), join(dir, 'policies'))
    const reloads = valueOf(await gateway.metrics(), 'payments_gate_policy_reloads_total{outcome="ok"}')
    gateway.run.child.kill('SIGHUP')
    t.ok(
      await until(
        async () => valueOf(await gateway.metrics(), 'payments_gate_policy_reloads_total{outcome="ok"}') > reloads,
      ),
    )
    const refused = await gbpSale()
    t.equal(refused.status, 400, 'the new policy is in force')
    t.equal(refused.json.errorName, 'currencyIsNotSupported')
    gateway.run.child.kill('SIGTERM')
    t.equal(await gateway.run.exited, 0)
  },
)
