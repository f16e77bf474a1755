import { readFileSync } from 'node:fs'
import { copyFile, rename } from 'node:fs/promises'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { COVERED, spawnCli, type Running } from '../helpers/cli.js'
import { httpsSale, serialOf, servedSerial as servedSerialOf } from '../helpers/tls-client.js'
import { makePki } from '../helpers/certificates.js'
import { writeCredentials } from '../helpers/fixtures.js'
import { freePort, poll, startBackend } from '../helpers/servers.js'

/** docs/deployment-reference.md, TLS, with --workers 2 (a file of its own: three processes start slowly under the TypeScript loader). */
const dir = t.testdir()
const pki = await makePki(dir)
const ca = readFileSync(pki.ca)
const credentials = await writeCredentials(dir)
const backend = await startBackend()
t.teardown(() => backend.close())
let reference = 0
const sale = (port: number) => httpsSale(port, ca, `tls-serve-${reference++}`)
const servedSerial = (port: number) => servedSerialOf(port, ca)

function serve(t: Test, args: string[]): Running {
  const run = spawnCli(
    ['serve', '--target', backend.url, '--credentials', credentials, '--shutdown-delay', '0', ...args],
    COVERED,
  )
  t.teardown(() => void run.child.kill('SIGKILL'))
  return run
}

t.test('serve --workers 2: every worker serves the renewed pair', async (t) => {
  const cert = join(t.testdir(), 'tls.crt')
  const key = join(cert, '..', 'tls.key')
  await copyFile(pki.server.cert, cert)
  await copyFile(pki.server.key, key)
  const [listen, admin] = [await freePort(), await freePort()]
  const run = serve(t, [
    '--workers',
    '2',
    '--idempotency',
    'off',
    '--listen',
    `127.0.0.1:${listen}`,
    '--admin',
    `127.0.0.1:${admin}`,
    '--tls-cert',
    cert,
    '--tls-key',
    key,
  ])
  await poll(`http://127.0.0.1:${admin}/readyz`, 200)
  t.equal(await sale(listen), 201)
  const next = await pki.issue('workers-renewed')
  await copyFile(next.key, `${key}.tmp`)
  await copyFile(next.cert, `${cert}.tmp`)
  await rename(`${key}.tmp`, key)
  await rename(`${cert}.tmp`, cert)
  await run.waitFor(/("msg":"certificates reloaded"[^]*){2}/)
  // The primary hands connections to its workers in turn: a few new ones reach both.
  const served = await Promise.all(Array.from({ length: 8 }, () => servedSerial(listen)))
  t.same([...new Set(served)], [serialOf(next)])
  t.equal(await sale(listen), 201)
  run.child.kill('SIGTERM')
  t.equal(await run.exited, 0)
})
