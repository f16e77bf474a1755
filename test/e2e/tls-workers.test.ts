import { X509Certificate } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { copyFile, rename } from 'node:fs/promises'
import { request } from 'node:https'
import { join } from 'node:path'
import { connect } from 'node:tls'
import t, { type Test } from 'tap'
import { spawnCli, type Running } from '../helpers/cli.js'
import { makePki, type PemFiles } from '../helpers/certificates.js'
import { saleBody, writeCredentials } from '../helpers/fixtures.js'
import { paymentHeaders } from '../helpers/http.js'
import { freePort, poll, startBackend } from '../helpers/servers.js'

/** docs/deployment.md, TLS, with --workers 2 (a file of its own: three processes start slowly under the TypeScript loader). */
const dir = t.testdir()
const pki = await makePki(dir)
const ca = readFileSync(pki.ca)
const credentials = await writeCredentials(dir)
const backend = await startBackend()
t.teardown(() => backend.close())
const serialOf = (files: PemFiles) => new X509Certificate(readFileSync(files.cert)).serialNumber

/** The serial number of the certificate a new TLS connection to `port` is given. */
function servedSerial(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, ca, servername: 'localhost' }, () => {
      resolve(socket.getPeerCertificate().serialNumber)
      socket.end()
    })
    socket.on('error', reject)
  })
}

let reference = 0
/** One sale over HTTPS on a new connection: its status. */
function sale(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      `https://localhost:${port}/payments/sales/migrateCardOnFile`,
      { method: 'POST', headers: paymentHeaders(), ca, agent: false },
      (res) => {
        res.resume()
        res.on('end', () => resolve(res.statusCode as number))
      },
    )
    req.on('error', reject)
    req.end(JSON.stringify(saleBody({ transactionReference: `tls-serve-${reference++}` })))
  })
}

function serve(t: Test, args: string[]): Running {
  const run = spawnCli([
    'serve',
    '--target',
    backend.url,
    '--credentials',
    credentials,
    '--shutdown-delay',
    '0',
    ...args,
  ])
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
