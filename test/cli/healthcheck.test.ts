import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import t, { type Test } from 'tap'
import { createAdmin } from '../../lib/admin.js'
import { endsWithThisProcess, freePort } from '../helpers/servers.js'

/**
 * scripts/healthcheck.js (the image's HEALTHCHECK, docs/deployment.md) against a real admin listener, for every
 * form `--admin` takes, as the flag, as `--admin=` and as PAYMENTS_GATE_ADMIN. The script reads them with serve's
 * own parser from dist/: one rule for both.
 */
const repository = new URL('../..', import.meta.url)
t.ok(existsSync(new URL('dist/cli/options.js', repository)), 'dist/ is built (npm run build)')

/**
 * A process whose command line and environment are a gateway's, as the script reads them from /proc, and nothing
 * else: a shell waiting on its open stdin, which costs no CPU where a node process would start a runtime.
 */
function gatewayLike(t: Test, args: string[], env: Record<string, string> = {}): number {
  const child = endsWithThisProcess(
    spawn('sh', ['-c', 'read _', 'gateway', 'serve', '--target', 'http://127.0.0.1:9', ...args], {
      env: { PATH: process.env.PATH as string, PAYMENTS_GATE_CREDENTIALS: 'credentials.json', ...env },
      stdio: ['pipe', 'ignore', 'ignore'],
    }),
  )
  t.teardown(() => void child.kill('SIGKILL'))
  return child.pid as number
}

/** The script's exit code for that process, run as the image runs it: plain node, none of tap's hooks. */
async function healthcheck(pid: number): Promise<number | null> {
  const child = spawn('env', ['-u', 'NODE_OPTIONS', process.execPath, 'scripts/healthcheck.js', String(pid)], {
    cwd: repository,
    stdio: 'ignore',
  })
  return new Promise((resolve) => child.on('exit', resolve))
}

/** A real admin listener at `host` (every interface when undefined) on a free port, closed when the test ends. */
async function adminAt(t: Test, host: string | undefined): Promise<number> {
  const admin = createAdmin({ ready: () => true, metrics: async () => '', onAcceptError: (error) => t.error(error) })
  const { port } = await admin.listen(await freePort(), host)
  t.teardown(() => admin.close())
  return port
}

const forms: [host: string | undefined, form: (port: number) => string][] = [
  [undefined, (port) => String(port)],
  ['127.0.0.1', (port) => `127.0.0.1:${port}`],
  ['::1', (port) => `[::1]:${port}`],
  ['0.0.0.0', (port) => `0.0.0.0:${port}`],
  ['::', (port) => `[::]:${port}`],
]

for (const [host, form] of forms) {
  t.test(`--admin ${form(9901)}: as the flag, as --admin=, as the variable`, async (t) => {
    const port = await adminAt(t, host)
    const admin = form(port)
    t.equal(await healthcheck(gatewayLike(t, ['--admin', admin])), 0, `--admin ${admin}`)
    t.equal(await healthcheck(gatewayLike(t, [`--admin=${admin}`])), 0, `--admin=${admin}`)
    t.equal(await healthcheck(gatewayLike(t, [], { PAYMENTS_GATE_ADMIN: admin })), 0, `PAYMENTS_GATE_ADMIN=${admin}`)
  })
}

/** The Fetch standard's "bad ports" that an unprivileged process may bind: fetch refuses each, node:http does not. */
const FETCH_BAD_PORTS = [10080, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697]

t.test('an admin listener on a port fetch refuses is asked all the same', async (t) => {
  const admin = createAdmin({ ready: () => true, metrics: async () => '', onAcceptError: (error) => t.error(error) })
  t.teardown(() => admin.close())
  let port: number | undefined
  for (const candidate of FETCH_BAD_PORTS) {
    port = await admin.listen(candidate, '127.0.0.1').then(
      (bound) => bound.port,
      () => undefined,
    )
    if (port !== undefined) break
  }
  if (port === undefined) return void t.fail(`every one of ${FETCH_BAD_PORTS.join(', ')} is taken`)
  await t.rejects(
    fetch(`http://127.0.0.1:${port}/healthz`),
    { cause: { message: 'bad port' } },
    `fetch refuses ${port}`,
  )
  t.equal(await healthcheck(gatewayLike(t, ['--admin', `127.0.0.1:${port}`])), 0, `--admin 127.0.0.1:${port}`)
})

t.test('the flag wins over the variable; nothing answering is unhealthy; no admin listener is healthy', async (t) => {
  const port = await adminAt(t, '127.0.0.1')
  const nothing = await freePort()
  t.equal(await healthcheck(gatewayLike(t, ['--admin', String(port)], { PAYMENTS_GATE_ADMIN: String(nothing) })), 0)
  t.equal(await healthcheck(gatewayLike(t, ['--admin', String(nothing)], { PAYMENTS_GATE_ADMIN: String(port) })), 1)
  t.equal(await healthcheck(gatewayLike(t, [], { PAYMENTS_GATE_ADMIN: `[::1]:${nothing}` })), 1)
  t.equal(await healthcheck(gatewayLike(t, [])), 0, 'no --admin: nothing to ask')
  t.equal(await healthcheck(gatewayLike(t, [], { PAYMENTS_GATE_ADMIN: '' })), 0, 'an empty variable is not set')
})
