import { readFileSync } from 'node:fs'
import { copyFile, mkdir, rename, symlink } from 'node:fs/promises'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { closedSince, COVERED, openResources, runCliOnce, spawnCli, type Running } from '../helpers/cli.js'
import { httpsSale, serialOf, servedSerial as servedSerialOf } from '../helpers/tls-client.js'
import { makePki, type PemFiles } from '../helpers/certificates.js'
import { writeCredentials } from '../helpers/fixtures.js'
import { until } from '../helpers/wait.js'
import { freePort, poll, startBackend } from '../helpers/servers.js'

/** docs/deployment-reference.md, TLS, on the real `serve` process: a Secret's `..data` swap, a refused pair counted, SIGHUP; --workers in tls-workers.test.ts. */
const dir = t.testdir()
const pki = await makePki(dir)
const ca = readFileSync(pki.ca)
const credentials = await writeCredentials(dir)
const backend = await startBackend()
t.teardown(() => backend.close())
let reference = 0
const sale = (port: number) => httpsSale(port, ca, `tls-serve-${reference++}`)
const servedSerial = (port: number) => servedSerialOf(port, ca)

/** A folder laid out as a mounted Secret: `tls.crt` and `tls.key` through the `..data` symlink; `swap` points it at a new version. */
async function secretFolder(
  t: Test,
  first: PemFiles,
): Promise<{ cert: string; key: string; swap(pair: PemFiles): Promise<void> }> {
  const mount = t.testdir()
  let version = 0
  async function write(pair: PemFiles): Promise<string> {
    const name = `..v${version++}`
    await mkdir(join(mount, name))
    await copyFile(pair.cert, join(mount, name, 'tls.crt'))
    await copyFile(pair.key, join(mount, name, 'tls.key'))
    return name
  }
  await symlink(await write(first), join(mount, '..data'))
  await symlink('..data/tls.crt', join(mount, 'tls.crt'))
  await symlink('..data/tls.key', join(mount, 'tls.key'))
  return {
    cert: join(mount, 'tls.crt'),
    key: join(mount, 'tls.key'),
    // As the kubelet does it: a new folder, a new link beside the old one, renamed over it.
    async swap(pair) {
      await symlink(await write(pair), join(mount, '..data_tmp'))
      await rename(join(mount, '..data_tmp'), join(mount, '..data'))
    },
  }
}

async function metricsOf(admin: number): Promise<string> {
  return (await fetch(`http://127.0.0.1:${admin}/metrics`)).text()
}

function serve(t: Test, args: string[]): Running {
  const run = spawnCli(
    ['serve', '--target', backend.url, '--credentials', credentials, '--shutdown-delay', '0', ...args],
    COVERED,
  )
  t.teardown(() => void run.child.kill('SIGKILL'))
  return run
}

t.test(
  'serve --tls-cert: HTTPS; a ..data swap served to new connections; a bad pair refused, counted, the last good kept; SIGHUP',
  async (t) => {
    const secret = await secretFolder(t, pki.server)
    const [listen, admin] = [await freePort(), await freePort()]
    const run = serve(t, [
      '--listen',
      `127.0.0.1:${listen}`,
      '--admin',
      `127.0.0.1:${admin}`,
      '--tls-cert',
      secret.cert,
      '--tls-key',
      secret.key,
    ])
    await poll(`http://127.0.0.1:${admin}/readyz`, 200)
    t.equal(await sale(listen), 201)
    t.equal(await servedSerial(listen), serialOf(pki.server))

    const next = await pki.issue('renewed')
    await secret.swap(next)
    t.ok(
      await until(async () => (await servedSerial(listen)) === serialOf(next), 10_000),
      'the renewed certificate, without a restart',
    )
    t.equal(await sale(listen), 201)

    const failed = async () =>
      Number(
        /payments_gate_tls_reloads_total\{side="listener",outcome="failed"\} (\d+)/.exec(await metricsOf(admin))?.[1] ??
          0,
      )
    // A reload that read the renewal's swap between its two files read them again: no refusal of its own.
    t.equal(await failed(), 0, 'the renewal counted no refusal')
    await secret.swap({ cert: pki.server.cert, key: pki.client.key })
    t.ok(await until(async () => (await failed()) === 1, 10_000), 'the bad pair refused, counted once')
    await run.waitFor(/certificate file refused/)
    t.match(
      run.output().stdout,
      /"reason":"not the key of the certificate","msg":"certificate file refused, the last good one stays in force"/,
    )
    t.equal(await servedSerial(listen), serialOf(next), 'the last good pair stays')
    t.match(await metricsOf(admin), /payments_gate_tls_files_refused\{side="listener"\} 1/)

    await secret.swap(next)
    t.ok(
      await until(
        async () => /payments_gate_tls_files_refused\{side="listener"\} 0/.test(await metricsOf(admin)),
        10_000,
      ),
      'the pair fixed: nothing refused',
    )
    const okBefore = Number(
      /payments_gate_tls_reloads_total\{side="listener",outcome="ok"\} (\d+)/.exec(await metricsOf(admin))?.[1],
    )
    run.child.kill('SIGHUP')
    t.ok(
      await until(
        async () =>
          new RegExp(`payments_gate_tls_reloads_total\\{side="listener",outcome="ok"\\} ${okBefore + 1}`).test(
            await metricsOf(admin),
          ),
        10_000,
      ),
      'SIGHUP re-reads the pair',
    )
    run.child.kill('SIGTERM')
    t.equal(await run.exited, 0)
  },
)

// In this process: a refusal at start-up exits 2 in a real process of its own in test/cli/startup.test.ts, with and
// without --workers.
t.test('a missing file: one line naming the flag, exit 2, also under --workers', async (t) => {
  const missing = join(dir, 'none.pem')
  for (const workers of ['1', '2']) {
    const open = openResources()
    const run = await runCliOnce([
      'serve',
      '--target',
      backend.url,
      '--credentials',
      credentials,
      '--workers',
      workers,
      '--idempotency',
      'off',
      '--listen',
      '127.0.0.1:0',
      '--tls-cert',
      pki.server.cert,
      '--tls-key',
      missing,
    ])
    t.equal(run.code, 2)
    t.equal(
      run.stderr,
      `payments-gate serve: --tls-key: ${missing}: no such file or folder; give a readable PEM file (docs/deployment-reference.md#tls)\n`,
    )
    t.equal(run.stdout, '', 'nothing logged, no worker started')
    t.ok(await until(() => closedSince(open)), `--workers ${workers}: all it opened is closed`)
  }
})
